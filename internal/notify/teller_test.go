package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const podUID = "5f0c3a52-pod-uid"

// teller runs a stall teller on the world's fakes until the test ends.
func (w *world) teller(t *testing.T) *notify.StallTeller {
	now := func() time.Time { return w.now }
	tl := &notify.StallTeller{Config: w.cfg, Senders: notify.Senders(w.cfg, w.kube, nil, now), Settle: 50 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = tl.Start(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return tl
}

func arcStall(phase string, began, at time.Time) notify.Stall {
	return notify.Stall{Record: death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "runner-x", UID: podUID, Preset: "arc-scale-set"}},
		Phase: phase, Began: began, At: at}
}

func labStall(phase string, began, at time.Time) notify.Stall {
	return notify.Stall{Record: death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "runner-build", UID: podUID, Preset: "gitlab"}},
		Phase: phase, Began: began, At: at}
}

func arcFacts(context.Context) (*v1alpha1.Job, int64) {
	return &v1alpha1.Job{ID: "7311", Run: "900123", Project: "acme/app", Name: "build", Source: "EphemeralRunner/runner-x", CreatedBy: arcController}, 4 << 30
}

func labFacts(context.Context) (*v1alpha1.Job, int64) {
	return &v1alpha1.Job{ID: "42", Project: "1234", Source: runnerpod.JobFromPodMarks, CreatedBy: manager}, 2 << 30
}

func checkRuns(t *testing.T, gh *notifytest.GitHub, n int) []notifytest.CheckRun {
	t.Helper()
	require.Eventually(t, func() bool { return len(gh.CheckRuns()) == n }, 5*time.Second, 10*time.Millisecond)
	return gh.CheckRuns()
}

func TestAStalledRunnersCheckRunIsInProgressThenItsDeathCompletesIt(t *testing.T) {
	dead := oom()
	dead.Record.UID = podUID
	w := newWorld(t, dead)
	w.cfg.Sinks = nil
	tl := w.teller(t)
	began := w.now.Add(-time.Minute)

	tl.Stalled(context.Background(), arcStall(notify.StallUnderWay, began, w.now), arcFacts)
	cr := checkRuns(t, w.gh, 1)[0]
	assert.Equal(t, "in_progress", cr.Status)
	assert.Empty(t, cr.Conclusion)
	assert.Equal(t, "runnerguard: build", cr.Name, "the name the death's run takes")
	assert.Equal(t, notify.StallExternalID(podUID), cr.ExternalID)
	assert.Equal(t, "Runner stalled at its 4 GiB memory limit", cr.Output.Title)
	assert.Contains(t, cr.Output.Summary, "for 60s")
	assert.NotContains(t, cr.Output.Summary, podUID)

	// A new leader sees the stall again: it is told already.
	w.teller(t).Stalled(context.Background(), arcStall(notify.StallUnderWay, began, w.now), arcFacts)
	time.Sleep(200 * time.Millisecond)
	assert.Len(t, w.gh.CheckRuns(), 1)

	w.reconcile(t, w.leader(), "oom")
	runs := checkRuns(t, w.gh, 1)
	assert.Equal(t, "completed", runs[0].Status, "the death completes the same run")
	assert.Equal(t, "failure", runs[0].Conclusion)
	assert.Equal(t, "uid-oom", runs[0].ExternalID, "as the death's own, which its retries find")
	assert.Equal(t, "Runner OOM-killed: 7.9 GiB of its 8 GiB", runs[0].Output.Title)
	assert.Equal(t, notify.PhaseSent, notify.Find(w.status(t, "oom"), notify.GitHub).Phase)

	// Its end, after: the death completed it, nothing is written.
	tl.End(arcStall(notify.StallEnded, began, w.now))
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, "failure", w.gh.CheckRuns()[0].Conclusion)
	assert.Empty(t, w.gh.Errors())
}

func TestARecoveredRunnersCheckRunIsCompletedNeutral(t *testing.T) {
	w := newWorld(t)
	tl := w.teller(t)
	began := w.now.Add(-time.Minute)
	tl.Stalled(context.Background(), arcStall(notify.StallUnderWay, began, w.now), arcFacts)
	require.Equal(t, "in_progress", checkRuns(t, w.gh, 1)[0].Status)

	tl.End(arcStall(notify.StallRecovered, began, began.Add(4*time.Minute)))
	require.Eventually(t, func() bool { return w.gh.CheckRuns()[0].Status == "completed" }, 5*time.Second, 10*time.Millisecond)
	cr := w.gh.CheckRuns()[0]
	assert.Equal(t, "neutral", cr.Conclusion)
	assert.Equal(t, "Runner recovered after 4m stalled at its 4 GiB memory limit", cr.Output.Title)
	assert.NotEmpty(t, cr.CompletedAt)
	assert.Len(t, w.gh.CheckRuns(), 1)
	assert.Empty(t, w.gh.Errors())
}

func TestAPodEndedStalledWithNoDeathToldIsCompletedAfterTheSettle(t *testing.T) {
	w := newWorld(t)
	tl := w.teller(t)
	began := w.now.Add(-time.Minute)
	tl.Stalled(context.Background(), labStall(notify.StallUnderWay, began, w.now), labFacts)
	require.Eventually(t, func() bool { return len(w.gl.Statuses()) == 1 }, 5*time.Second, 10*time.Millisecond)
	tl.End(labStall(notify.StallEnded, began, began.Add(10*time.Minute)))
	require.Eventually(t, func() bool { return w.gl.Statuses()[0].State == "success" }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, "Runner ended after 10m stalled at its 2 GiB memory limit", w.gl.Statuses()[0].Description)
	assert.Len(t, w.gl.Statuses(), 1)
	assert.Empty(t, w.gl.Errors())
}

func TestAStalledGitLabJobsStatusIsRunningThenTheDeathsInPlace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		death func(r *v1alpha1.DeathRecord)
		state string
	}{
		{"a death fails it", func(*v1alpha1.DeathRecord) {}, "failed"},
		{"a runner drained on purpose: success, since GitLab never skips a running status", func(r *v1alpha1.DeathRecord) {
			r.Class, r.DeleteRule, r.Deleted = string(death.DeletedRunning), string(runnerpod.RuleNodeDrain), true
		}, "success"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dead := build("died", manager, "1234")
			dead.Record.UID = podUID
			tc.death(&dead.Record)
			w := newWorld(t, dead)
			w.cfg.Sinks = nil
			tl := w.teller(t)
			tl.Stalled(context.Background(), labStall(notify.StallUnderWay, w.now.Add(-time.Minute), w.now), labFacts)
			require.Eventually(t, func() bool { return len(w.gl.Statuses()) == 1 }, 5*time.Second, 10*time.Millisecond)
			st := w.gl.Statuses()[0]
			assert.Equal(t, "running", st.State)
			assert.Equal(t, "runnerguard: job 42", st.Name, "the death's status's name")
			assert.Equal(t, int64(7), st.PipelineID)
			assert.Contains(t, st.Description, "Runner stalled at its 2 GiB memory limit for 60s so far: raise")

			w.reconcile(t, w.leader(), "died")
			rep := notify.Find(w.status(t, "died"), notify.GitLab)
			require.Equal(t, notify.PhaseSent, rep.Phase, rep.Message)
			require.Len(t, w.gl.Statuses(), 1, "replaced in place")
			assert.Equal(t, tc.state, w.gl.Statuses()[0].State)
			assert.Empty(t, w.gl.Errors())

			// A leader that stopped mid-attempt finds the death's status,
			// not the stall's.
			rec := death.FromObject(dead)
			sender := notify.Senders(w.cfg, w.kube, nil, func() time.Time { return w.now })[notify.GitLab]
			_, found, err := sender.Find(context.Background(), notify.Delivery{Record: rec, ID: "uid-died", Target: notify.Plan(rec, w.cfg)[0]})
			require.NoError(t, err)
			assert.True(t, found)
		})
	}
}

func TestAStallOverBeforeItIsToldIsToldNowhere(t *testing.T) {
	w := newWorld(t)
	tl := &notify.StallTeller{Config: w.cfg, Senders: notify.Senders(w.cfg, w.kube, nil, time.Now)}
	// No worker runs yet: the stall waits, and its end comes first.
	tl.Stalled(context.Background(), arcStall(notify.StallUnderWay, w.now, w.now), arcFacts)
	tl.End(arcStall(notify.StallRecovered, w.now, w.now.Add(time.Minute)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = tl.Start(ctx); close(done) }()
	time.Sleep(200 * time.Millisecond)
	cancel()
	<-done
	assert.Zero(t, w.gh.Calls())
}
