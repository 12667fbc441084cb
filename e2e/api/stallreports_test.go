//go:build e2e

package api

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// withVitals gives w's status the vitals sidecar, running for minutes and
// ready, and its runner container a memory limit.
func withVitals(w *podtest.Wrapper, container string) *podtest.Wrapper {
	for i := range w.Spec.Containers {
		if w.Spec.Containers[i].Name == container {
			w.Spec.Containers[i].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}
			w.Spec.Containers[i].Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}
		}
	}
	w.Status.InitContainerStatuses = []corev1.ContainerStatus{{
		Name: runnerpod.VitalsContainer, Image: "example.com/vitals:1", ImageID: "example.com/vitals@sha256:0", ContainerID: "containerd://vitals-1",
		Ready: true, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: time.Now().Add(-5 * time.Minute)}}},
	}}
	return w
}

// vitalsReady writes the sidecar's ready flag through pods/status, as the
// node's kubelet does after its readiness probe.
func vitalsReady(t *testing.T, pod *corev1.Pod, ready bool) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &corev1.Pod{}
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
			return err
		}
		for i := range got.Status.InitContainerStatuses {
			if got.Status.InitContainerStatuses[i].Name == runnerpod.VitalsContainer {
				got.Status.InitContainerStatuses[i].Ready = ready
			}
		}
		return admin.Status().Update(context.Background(), got)
	}))
}

func checkRunNamed(t *testing.T, r *reporting, name string, ok func(notifytest.CheckRun) bool, what string) notifytest.CheckRun {
	t.Helper()
	var got notifytest.CheckRun
	require.Eventually(t, func() bool {
		for _, cr := range r.gh.CheckRuns() {
			if cr.Name == name && ok(cr) {
				got = cr
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, what)
	return got
}

func statusNamed(t *testing.T, r *reporting, name string, ok func(notifytest.Status) bool, what string) notifytest.Status {
	t.Helper()
	var got notifytest.Status
	require.Eventually(t, func() bool {
		for _, s := range r.gl.Statuses() {
			if s.Name == name && ok(s) {
				got = s
				return true
			}
		}
		return false
	}, time.Minute, 200*time.Millisecond, what)
	return got
}

// A runner stalled at its memory limit is told on its job's commit while
// it lasts (GitHub's in-progress check run, GitLab's running status), by
// the leader that sees the kubelet's ready flag fall; its death then
// completes that same check run and replaces that status. A runner that
// recovers has its check run completed neutral, and its job's normal end
// writes nothing more.
func TestAStallIsToldWhileItLastsAndItsDeathOrRecoveryCompletesIt(t *testing.T) {
	ns := newNamespace(t, nil)
	r := startReporting(t, ns)
	manager := as(t, ownerPrincipal)
	inProgress := func(cr notifytest.CheckRun) bool { return cr.Status == "in_progress" }
	completed := func(cr notifytest.CheckRun) bool { return cr.Status == "completed" }

	// An ARC runner stalls, then is OOM-killed.
	dies := create(t, as(t, arcController), withVitals(runningJob(t, ns, "arc-stall1", "31885503001", "build (stalls)"), "runner").Obj())
	vitalsReady(t, dies, false)
	cr := checkRunNamed(t, r, "runnerguard: build (stalls)", inProgress, "the stall's in-progress check run")
	assert.Equal(t, reportSHA, cr.HeadSHA)
	assert.Equal(t, "Runner stalled at its 4 GiB memory limit", cr.Output.Title)
	assert.Contains(t, cr.Output.Summary, "What you can do: raise the job's memory limit")
	assert.Equal(t, notify.StallExternalID(string(dies.UID)), cr.ExternalID)

	st := podtest.Runner(ns, dies.Name).Terminated("runner", 137, "OOMKilled").Obj().Status
	setStatus(t, dies, st)
	require.NoError(t, deletePod(as(t, arcController), dies))
	assert.Equal(t, notify.PhaseSent, reportOf(t, dies, notify.GitHub).Phase)
	cr = checkRunNamed(t, r, "runnerguard: build (stalls)", completed, "the death's completion of the same check run")
	assert.Equal(t, "failure", cr.Conclusion)
	assert.Contains(t, cr.Output.Title, "Runner OOM-killed")
	assert.NotEqual(t, notify.StallExternalID(string(dies.UID)), cr.ExternalID, "now the death's own")

	// Another stalls and recovers; its job then ends normally.
	recovers := create(t, as(t, arcController), withVitals(runningJob(t, ns, "arc-stall2", "31885503002", "test (recovers)"), "runner").Obj())
	vitalsReady(t, recovers, false)
	checkRunNamed(t, r, "runnerguard: test (recovers)", inProgress, "the stall's in-progress check run")
	vitalsReady(t, recovers, true)
	cr = checkRunNamed(t, r, "runnerguard: test (recovers)", completed, "the recovery's completion")
	assert.Equal(t, "neutral", cr.Conclusion, "information, which a required check counts as passing")
	assert.Regexp(t, `^Runner recovered after \S+ stalled at its 4 GiB memory limit$`, cr.Output.Title)
	setStatus(t, recovers, podtest.Runner(ns, recovers.Name).Terminated("runner", 0, "Completed").Obj().Status)
	require.NoError(t, deletePod(as(t, arcController), recovers))

	// A GitLab build pod stalls, then is OOM-killed.
	build := withVitals(podtest.GitLab(ns, "runner-stall-project-42-concurrent-0").RunningSince("build", time.Now().Add(-time.Minute)).
		Annotate(gitlab.JobIDAnnotation, "6002").Label(gitlab.ProjectIDLabel, "42"), "build")
	lab := create(t, manager, build.Obj())
	vitalsReady(t, lab, false)
	running := statusNamed(t, r, "runnerguard: job 6002", func(s notifytest.Status) bool { return s.State == "running" }, "the stall's running status")
	assert.Contains(t, running.Description, "Runner stalled at its 4 GiB memory limit for ")
	assert.Equal(t, int64(9), running.PipelineID)
	setStatus(t, lab, podtest.GitLab(ns, lab.Name).Terminated("build", 137, "OOMKilled").Obj().Status)
	assert.Equal(t, notify.PhaseSent, reportOf(t, lab, notify.GitLab).Phase)
	failed := statusNamed(t, r, "runnerguard: job 6002", func(s notifytest.Status) bool { return s.State == "failed" }, "the death's status in its place")
	assert.Contains(t, failed.Description, "Runner OOM-killed")

	// One run or status each: the deaths and the recovery wrote over the
	// stalls', and the normal end wrote nothing.
	names := map[string]int{}
	for _, cr := range r.gh.CheckRuns() {
		names[cr.Name]++
	}
	assert.Equal(t, map[string]int{"runnerguard: build (stalls)": 1, "runnerguard: test (recovers)": 1}, names)
	assert.Equal(t, "neutral", checkRunNamed(t, r, "runnerguard: test (recovers)", completed, "").Conclusion, "the job's normal end wrote nothing")
	assert.Len(t, r.gl.Statuses(), 1, "the stall's status replaced in place")
	assert.Empty(t, append(r.gh.Errors(), r.gl.Errors()...), "every request had the published shape")
}
