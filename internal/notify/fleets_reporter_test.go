package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const (
	jobController = "system:serviceaccount:kube-system:job-controller"
	wpAgent       = "system:serviceaccount:woodpecker:woodpecker-agent"
	bkUUID        = "0190a3c4-1b2c-4d5e-8f90-a1b2c3d4e5f6"
	bkPod         = "buildkite-" + bkUUID + "-x4k2p"
	deleter       = "system:serviceaccount:ci:stale-runner-reaper"
)

// withBuildkite gives the world a Buildkite whose build 42 of acme/app ran
// the job on an agent of host, its token's Secret and Woodpecker's agent.
func withBuildkite(t *testing.T, w *world, host string) *notifytest.Buildkite {
	bk := notifytest.NewBuildkite("bkua_fake", map[string][]notifytest.BuildkiteJob{"acme/app/42": {{ID: "other"}, {ID: bkUUID, AgentHostname: host}}})
	t.Cleanup(bk.Close)
	require.NoError(t, w.kube.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "runnerguard", Name: "buildkite"},
		Data: map[string][]byte{notify.KeyToken: []byte("bkua_fake")}}))
	w.cfg.Buildkite = &config.Buildkite{URL: bk.URL + "/", Secret: "buildkite", Creators: []string{jobController}}
	w.cfg.Woodpecker = &config.Woodpecker{Agents: []string{wpAgent}}
	w.cfg.Sinks = nil
	return bk
}

func bkRecord(name, createdBy string) *v1alpha1.RunnerDeath {
	return record(name, v1alpha1.DeathRecord{Pod: bkPod, Preset: "buildkite", Container: "container-0", Class: string(death.DeletedRunning),
		Deleted: true, DeletedBy: deleter, DeleteRule: string(runnerpod.RuleBusy), Node: "ip-10-0-3-17.eu-west-1.compute.internal",
		Job: &v1alpha1.Job{ID: bkUUID, URL: "https://buildkite.com/acme/app/builds/42#" + bkUUID, Project: "app", Name: "test",
			Source: runnerpod.JobFromPodMarks, CreatedBy: createdBy}})
}

// A Buildkite job's death is one annotation on its build, in its job's
// context, whatever the leaders; a leader that stopped mid-attempt leaves
// it to the next, which finds it; the page names no principal or node.
func TestABuildkiteJobsDeathIsOneAnnotationOnItsBuild(t *testing.T) {
	w := newWorld(t, bkRecord("bk", jobController))
	bk := withBuildkite(t, w, bkPod)
	w.reconcile(t, w.leader(), "bk")
	w.reconcile(t, w.leader(), "bk")
	as := bk.Annotations()
	require.Len(t, as, 1, "one annotation, whatever the leaders")
	assert.Empty(t, bk.Errors())
	a := as[0]
	assert.Equal(t, "acme/app/42", a.Build)
	assert.Equal(t, "runnerguard-"+bkUUID, a.Context)
	assert.Equal(t, "error", a.Style)
	assert.False(t, a.Append)
	assert.Contains(t, a.Body, "Runner's pod deleted while its job ran")
	assert.Contains(t, a.Body, bkUUID, "the job")
	assert.NotContains(t, a.Body, deleter, "a build's page may be public")
	assert.NotContains(t, a.Body, "ip-10-0-3-17", "a build's page may be public")
	rep := notify.Find(w.status(t, "bk"), notify.Buildkite)
	require.NotNil(t, rep)
	assert.Equal(t, notify.PhaseSent, rep.Phase)
	assert.Equal(t, bk.URL+"/acme/app/builds/42#"+bkUUID, rep.Where)

	// The outcome never written: the next leader asks Buildkite first.
	o := &v1alpha1.RunnerDeath{}
	require.NoError(t, w.kube.Get(context.Background(), client.ObjectKey{Namespace: "ci", Name: "bk"}, o))
	base := o.DeepCopy()
	r := *rep
	r.Phase, r.Where = notify.PhaseSending, ""
	notify.Set(&o.Status, r)
	require.NoError(t, w.kube.Status().Patch(context.Background(), o, client.MergeFrom(base)))
	w.reconcile(t, w.leader(), "bk")
	assert.Equal(t, 1, bk.Annotations()[0].Writes, "found, not sent again")
	assert.Equal(t, notify.PhaseSent, notify.Find(w.status(t, "bk"), notify.Buildkite).Phase)
}

// A pod someone else created is not told; nor is one the job controller
// made from a Job with another job's marks: Buildkite says that job ran
// on another pod.
func TestABuildkiteJobIsToldOnlyFromThePodThatRanIt(t *testing.T) {
	w := newWorld(t, bkRecord("editor", "system:serviceaccount:ci:mallory"), bkRecord("copy", jobController))
	bk := withBuildkite(t, w, "buildkite-"+bkUUID+"-realp")
	w.reconcile(t, w.leader(), "editor")
	w.reconcile(t, w.leader(), "copy")
	assert.Empty(t, bk.Annotations())
	for name, why := range map[string]string{
		"editor": "the job pod was not created by a configured creator of the stack's pods (created by system:serviceaccount:ci:mallory)",
		"copy":   `ran on agent host "buildkite-` + bkUUID + `-realp", not on this pod`,
	} {
		rep := notify.Find(w.status(t, name), notify.Buildkite)
		require.NotNil(t, rep, name)
		assert.Equal(t, notify.PhaseSkipped, rep.Phase, name)
		assert.Contains(t, rep.Message, why, name)
	}
}

const wpSHA = "9fceb02d0ae598e95dc970b74767f19372d61af8"

func wpRecord(name, forge, repoID string) *v1alpha1.RunnerDeath {
	return record(name, v1alpha1.DeathRecord{Pod: "wp-01j9x2k7m3", Preset: "woodpecker", Container: "wp-01j9x2k7m3", Class: string(death.NodeEviction),
		Job: &v1alpha1.Job{ID: "1342", Name: "test", Project: "acme/app", Commit: wpSHA, Forge: forge, RepositoryID: repoID,
			Source: runnerpod.JobFromPodMarks, CreatedBy: wpAgent}})
}

// A Woodpecker step's death goes to its commit on its forge: GitHub's
// check run in the repository of the server's id for it (a step's
// CI_REPO naming another repository is not told there), GitLab's status
// in the project of that id; another forge is Skipped, saying why.
func TestAWoodpeckerStepIsToldOnItsCommitOnItsForge(t *testing.T) {
	w := newWorld(t, wpRecord("gh", "github", "777"), wpRecord("other", "github", "778"), wpRecord("gl", "gitlab", "1234"), wpRecord("fj", "forgejo", "1"))
	withBuildkite(t, w, bkPod)
	w.gh.Repos = map[string]int64{"acme/app": 777}
	for _, n := range []string{"gh", "other", "gl", "fj", "gh", "gl"} {
		w.reconcile(t, w.leader(), n)
	}
	runs := w.gh.CheckRuns()
	require.Len(t, runs, 1, "once")
	assert.Empty(t, w.gh.Errors())
	assert.Equal(t, "acme/app", runs[0].Repository)
	assert.Equal(t, wpSHA, runs[0].HeadSHA)
	assert.Equal(t, "runnerguard: test", runs[0].Name)
	assert.Equal(t, "failure", runs[0].Conclusion)
	assert.Empty(t, runs[0].DetailsURL, "no link the pipeline could have chosen")
	assert.Contains(t, runs[0].Output.Summary, "commit "+wpSHA+", forge github", "the facts name the step's commit and forge")
	sts := w.gl.Statuses()
	require.Len(t, sts, 1, "once")
	assert.Empty(t, w.gl.Errors())
	assert.Equal(t, "1234", sts[0].Project)
	assert.Equal(t, wpSHA, sts[0].SHA)
	assert.Equal(t, "runnerguard: test", sts[0].Name)
	assert.Equal(t, "failed", sts[0].State)
	for name, want := range map[string]struct{ dest, phase, why string }{
		"gh":    {notify.GitHub, notify.PhaseSent, ""},
		"gl":    {notify.GitLab, notify.PhaseSent, ""},
		"other": {notify.GitHub, notify.PhaseSkipped, "repository acme/app has id 777, not the step's forge id 778"},
		"fj":    {notify.Forge, notify.PhaseSkipped, "the step's forge is forgejo: runnerguard tells a commit on GitHub or GitLab only"},
	} {
		rep := notify.Find(w.status(t, name), want.dest)
		require.NotNil(t, rep, name)
		assert.Equal(t, want.phase, rep.Phase, name)
		assert.Contains(t, rep.Message, want.why, name)
	}
}

// A Woodpecker step stalled at its memory limit is told on its commit as
// an ARC runner's is: an in-progress check run its death then completes.
func TestAStalledWoodpeckerStepIsInProgressOnItsCommitUntilItsDeath(t *testing.T) {
	dead := wpRecord("wp", "github", "777")
	dead.Record.UID = podUID
	w := newWorld(t, dead)
	withBuildkite(t, w, bkPod)
	w.gh.Repos = map[string]int64{"acme/app": 777}
	tl := w.teller(t)
	began := w.now.Add(-time.Minute)
	facts := func(context.Context) (*v1alpha1.Job, int64) { return dead.Record.Job, 2 << 30 }
	stall := notify.Stall{Record: death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: dead.Record.Pod, UID: podUID, Preset: "woodpecker"}},
		Phase: notify.StallUnderWay, Began: began, At: w.now}
	tl.Stalled(context.Background(), stall, facts)
	cr := checkRuns(t, w.gh, 1)[0]
	assert.Equal(t, "in_progress", cr.Status)
	assert.Equal(t, wpSHA, cr.HeadSHA)
	assert.Equal(t, "runnerguard: test", cr.Name)

	w.reconcile(t, w.leader(), "wp")
	cr = checkRuns(t, w.gh, 1)[0]
	assert.Equal(t, "completed", cr.Status, "the death completes the stall's run")
	assert.Equal(t, "failure", cr.Conclusion)
}

// annotations waits for the fake to hold n annotations.
func annotations(t *testing.T, bk *notifytest.Buildkite, n int) []notifytest.Annotation {
	t.Helper()
	require.Eventually(t, func() bool { return len(bk.Annotations()) == n }, 5*time.Second, 10*time.Millisecond)
	return bk.Annotations()
}

// A Buildkite job stalled at its memory limit is a warning annotation in
// its job's context while it lasts; its death replaces it, and a leader
// that stopped mid-attempt does not take the stall's for the death's.
func TestAStalledBuildkiteJobIsAWarningItsDeathReplaces(t *testing.T) {
	dead := bkRecord("bk", jobController)
	dead.Record.UID = podUID
	w := newWorld(t, dead)
	bk := withBuildkite(t, w, bkPod)
	tl := w.teller(t)
	began := w.now.Add(-time.Minute)
	stall := notify.Stall{Record: death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: bkPod, UID: podUID, Preset: "buildkite"}},
		Phase: notify.StallUnderWay, Began: began, At: w.now}
	tl.Stalled(context.Background(), stall, func(context.Context) (*v1alpha1.Job, int64) { return dead.Record.Job, 2 << 30 })
	a := annotations(t, bk, 1)[0]
	assert.Equal(t, notify.StallOpenStyle, a.Style)
	assert.Equal(t, notify.AnnotationContext(bkUUID), a.Context)
	assert.Contains(t, a.Body, "Runner stalled at its 2 GiB memory limit")
	assert.Contains(t, a.Body, "This annotation is completed")

	// An attempt claimed, its outcome never written: the stall's warning
	// is not the death's annotation.
	o := &v1alpha1.RunnerDeath{}
	require.NoError(t, w.kube.Get(context.Background(), client.ObjectKey{Namespace: "ci", Name: "bk"}, o))
	base := o.DeepCopy()
	notify.Set(&o.Status, notify.Claim(nil, notify.Buildkite, w.now))
	require.NoError(t, w.kube.Status().Patch(context.Background(), o, client.MergeFrom(base)))
	w.reconcile(t, w.leader(), "bk")
	a = annotations(t, bk, 1)[0]
	assert.Equal(t, "error", a.Style, "the death replaced the stall")
	assert.Equal(t, 2, a.Writes)
	assert.Equal(t, notify.PhaseSent, notify.Find(w.status(t, "bk"), notify.Buildkite).Phase)

	// The stall's end finds the death's there and leaves it.
	stall.Phase = notify.StallEnded
	tl.End(stall)
	time.Sleep(200 * time.Millisecond)
	assert.Equal(t, "error", bk.Annotations()[0].Style)
	assert.Equal(t, 2, bk.Annotations()[0].Writes)
}

// A stall the runner lived through is completed as a success.
func TestARecoveredBuildkiteJobsStallIsASuccess(t *testing.T) {
	w := newWorld(t)
	bk := withBuildkite(t, w, bkPod)
	tl := w.teller(t)
	began := w.now.Add(-time.Minute)
	stall := notify.Stall{Record: death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: bkPod, UID: podUID, Preset: "buildkite"}},
		Phase: notify.StallUnderWay, Began: began, At: w.now}
	tl.Stalled(context.Background(), stall, func(context.Context) (*v1alpha1.Job, int64) { return bkRecord("bk", jobController).Record.Job, 2 << 30 })
	annotations(t, bk, 1)
	stall.Phase, stall.At = notify.StallRecovered, w.now.Add(time.Minute)
	tl.End(stall)
	require.Eventually(t, func() bool { return bk.Annotations()[0].Style == notify.StallOverStyle }, 5*time.Second, 10*time.Millisecond)
	a := bk.Annotations()[0]
	assert.Equal(t, 2, a.Writes, "replaced, not added")
	assert.Contains(t, a.Body, "Runner recovered after 2m stalled")
}
