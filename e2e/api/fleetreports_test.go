//go:build e2e

package api

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/buildkite"
	"github.com/runnerguard/runnerguard/internal/fleet/woodpecker"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const (
	bkJob      = "0190a3c4-1b2c-4d5e-8f90-a1b2c3d4e5f6"
	bkCopied   = "0190a3c4-1b2c-4d5e-8f90-a1b2c3d4e5f7"
	wpAgentSA  = "system:serviceaccount:woodpecker:woodpecker-agent"
	bkToken    = "bkua_e2e"
	bkReported = "buildkite-" + bkJob + "-x4k2p"
)

// startFleetReporting is startReporting with Buildkite's annotations (a
// stand-in whose build 42 of acme/app ran job bkJob on the pod bkReported
// and job bkCopied on another pod) and Woodpecker's steps told through
// GitHub, whose acme/app has the steps' repository id.
func startFleetReporting(t *testing.T, ns string) (*reporting, *notifytest.Buildkite) {
	t.Helper()
	r := startReporting(t, ns)
	bk := notifytest.NewBuildkite(bkToken, map[string][]notifytest.BuildkiteJob{"acme/app/42": {
		{ID: bkJob, AgentHostname: bkReported}, {ID: bkCopied, AgentHostname: "buildkite-" + bkCopied + "-realp"}}})
	t.Cleanup(bk.Close)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apitest.ReleaseNamespace, Name: "reports-buildkite"}, Data: map[string][]byte{notify.KeyToken: []byte(bkToken)}}
	require.NoError(t, client.IgnoreAlreadyExists(admin.Create(context.Background(), s)))
	r.gh.Repos = map[string]int64{"acme/app": 700123}
	r.cfg.Reports.Buildkite = &config.Buildkite{URL: bk.URL + "/", Secret: "reports-buildkite", Creators: []string{jobController}}
	r.cfg.Reports.Woodpecker = &config.Woodpecker{Agents: []string{wpAgentSA}}
	r.restart(t)
	return r, bk
}

// bkOOM is a Buildkite job's pod for job, OOM-killed in its command.
func bkOOM(ns, job string) *corev1.Pod {
	w := podtest.Buildkite(ns, job).Terminated("checkout", 0, "Completed").Terminated("container-0", 137, "OOMKilled").Terminated("agent", 1, "Error")
	return w.Obj()
}

// A Buildkite job's death is one annotation on its build, whatever the
// leaders, naming neither the pod's creator nor any other principal; its
// marks cannot be rewritten after the pod's creation; a pod an editor
// created, or one the job controller made from a Job copying another
// job's marks, is not told.
func TestABuildkiteJobsDeathIsAnnotatedOnItsBuildOnceAndOnlyFromItsOwnPod(t *testing.T) {
	ns := newNamespace(t, nil)
	r, bk := startFleetReporting(t, ns)
	jobs := as(t, jobController)
	editor := as(t, reaper)

	pod := create(t, jobs, bkOOM(ns, bkJob))
	err := editor.Patch(context.Background(), pod, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+buildkite.JobURLAnnotation+`":"https://buildkite.com/other/app/builds/1#`+bkJob+`"}}}`)))
	require.Error(t, err, "the policy keeps the job's marks")
	assert.Contains(t, err.Error(), "written when the pod is created and never change")

	rep := reportOf(t, pod, notify.Buildkite)
	assert.Equal(t, notify.PhaseSent, rep.Phase, rep.Message)
	assert.Equal(t, bk.URL+"/acme/app/builds/42#"+bkJob, rep.Where)
	r.restart(t)
	r.restart(t)
	got := bk.Annotations()
	require.Len(t, got, 1, "told once, whatever the leaders")
	assert.Empty(t, bk.Errors())
	assert.Equal(t, 1, got[0].Writes, "never sent again")
	assert.Equal(t, "runnerguard-"+bkJob, got[0].Context)
	assert.Equal(t, "error", got[0].Style)
	assert.Contains(t, got[0].Body, "OOM")
	assert.NotContains(t, got[0].Body, jobController, "a build's page may be public: no principal")

	fw := podtest.Buildkite(ns, bkJob)
	fw.Name = "buildkite-" + bkJob + "-edit1"
	forged := create(t, editor, fw.Obj())
	setStatus(t, forged, bkOOM(ns, bkJob).Status)
	rep = reportOf(t, forged, notify.Buildkite)
	assert.Equal(t, notify.PhaseSkipped, rep.Phase)
	assert.Contains(t, rep.Message, "not created by a configured creator of the stack's pods")

	copied := create(t, jobs, bkOOM(ns, bkCopied))
	rep = reportOf(t, copied, notify.Buildkite)
	assert.Equal(t, notify.PhaseSkipped, rep.Phase)
	assert.Contains(t, rep.Message, "not on this pod")
	assert.Len(t, bk.Annotations(), 1, "Buildkite was told nothing more")
}

// A Woodpecker step's death is one check run on its commit in the
// repository its server names by id; its commit, as the injector copied
// it at CREATE, cannot be forged by the pod nor rewritten after; a step
// pod an editor created is not told.
func TestAWoodpeckerStepsDeathIsToldOnItsCommitOnce(t *testing.T) {
	ns := newNamespace(t, nil)
	r, _ := startFleetReporting(t, ns)
	agent := as(t, wpAgentSA)
	editor := as(t, reaper)
	commitKey := runnerpod.EnvAnnotation(woodpecker.CommitEnv)

	w := podtest.Woodpecker(ns, "build").Annotate(commitKey, "0000000000000000000000000000000000000000")
	pod := create(t, agent, w.Obj())
	assert.Equal(t, podtest.WoodpeckerCommit, pod.Annotations[commitKey], "the injector copies the step's env over the pod's claim")
	err := editor.Patch(context.Background(), pod, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+commitKey+`":"1111111111111111111111111111111111111111"}}}`)))
	require.Error(t, err, "the policy keeps the job's marks")
	assert.Contains(t, err.Error(), "written when the pod is created and never change")

	setStatus(t, pod, podtest.Woodpecker(ns, "build").Terminated(pod.Name, 137, "OOMKilled").Obj().Status)
	rep := reportOf(t, pod, notify.GitHub)
	assert.Equal(t, notify.PhaseSent, rep.Phase, rep.Message)
	r.restart(t)
	runs := r.gh.CheckRuns()
	require.Len(t, runs, 1, "told once")
	assert.Empty(t, r.gh.Errors())
	assert.Equal(t, "acme/app", runs[0].Repository)
	assert.Equal(t, podtest.WoodpeckerCommit, runs[0].HeadSHA)
	assert.Equal(t, "runnerguard: build", runs[0].Name)
	assert.Equal(t, "failure", runs[0].Conclusion)
	assert.NotContains(t, runs[0].Output.Summary, wpAgentSA, "a public repository's check run names no principal")

	forged := podtest.Woodpecker(ns, "forged")
	forged.Name = "wp-01j9x2k7m4"
	forged.Spec.Containers[0].Name = forged.Name
	fp := create(t, editor, forged.Obj())
	setStatus(t, fp, podtest.Woodpecker(ns, "forged").Terminated(fp.Spec.Containers[0].Name, 137, "OOMKilled").Obj().Status)
	rep = reportOf(t, fp, notify.GitHub)
	assert.Equal(t, notify.PhaseSkipped, rep.Phase)
	assert.Contains(t, rep.Message, "not created by a configured Woodpecker agent")
	assert.Len(t, r.gh.CheckRuns(), 1, "GitHub was told nothing more")
}
