//go:build e2e

package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// A runner whose job its CI service says ended (over 3 s ago here, the
// suite's --job-over-grace; 5 minutes by default), while the runner still
// runs (ARC keeps the job on its EphemeralRunner, issue 4603; a GitLab
// build pod its manager lost), is named a zombie of kind job-over and let
// go; a runner whose job runs is not, nor one whose job mark names a job
// that ended before its pod was created (not its job). The leader asks
// the services the reports go to (the fakes of GitHub and GitLab, held to
// their APIs' shapes) every 2 s here.
func TestARunnerWhoseJobEndedIsNamedAZombieAndLetGo(t *testing.T) {
	ns := newNamespace(t, nil)
	r := startReporting(t, ns)
	arc := as(t, arcController)
	over := create(t, arc, runningJob(t, ns, "arc-over", "31885504001", "build (over)").Obj())
	old := create(t, arc, runningJob(t, ns, "arc-old", "31885504002", "test (another's, long over)").Obj())
	running := create(t, arc, runningJob(t, ns, "arc-running", "31885504003", "lint (runs)").Obj())
	build := gitlabBuild(t, as(t, ownerPrincipal), ns, "runner-over-project-42-concurrent-0", "6003", "42")
	// Whole seconds, as the services date them, and after the pods'
	// creation, as a job's end always is.
	time.Sleep(time.Second)
	ended := time.Now().Truncate(time.Second).UTC()
	const run = "acme/app/11802293411"
	r.gh.SetJob(run, notifytest.WorkflowJob{ID: 1, RunnerName: over.Name, Status: "completed", CompletedAt: ended})
	r.gh.SetJob(run, notifytest.WorkflowJob{ID: 2, RunnerName: old.Name, Status: "completed", CompletedAt: ended.Add(-20 * time.Minute)})
	r.gh.SetJob(run, notifytest.WorkflowJob{ID: 3, RunnerName: running.Name, Status: "in_progress"})
	r.gl.SetJob("42", "6003", "success", ended)

	for _, p := range []*corev1.Pod{over, build} {
		eventually(t, func() bool { _, ok := zombieOf(t, p); return ok }, "the leader names "+p.Name+" a zombie")
		z, _ := zombieOf(t, p)
		assert.Equal(t, runnerpod.JobOverZombie, z.Kind)
		assert.Equal(t, ended, z.Since.UTC(), "a zombie since its service says its job ended")
		eventually(t, hasEvent(t, p, corev1.EventTypeWarning, recorder.ReasonZombie, "a zombie, job-over since"), "a RunnerZombie Event names it")
		assert.False(t, judgementOf(t, marksSettled(t, p)).Busy, "its marks no longer hold its node")
		require.NoError(t, evict(as(t, reaper), p, true), "its eviction passes, so its node can go")
	}
	err := deletePod(as(t, reaper), over)
	require.True(t, apierrors.IsForbidden(err), "a reaper the operator did not allow may not delete it: %v", err)
	assert.Contains(t, err.Error(), "it is a zombie (job-over since")

	// The two were named in the rounds that asked about the others too:
	// a few more, and still neither is.
	time.Sleep(5 * time.Second)
	for _, p := range []*corev1.Pod{old, running} {
		_, named := zombieOf(t, p)
		assert.False(t, named, "%s: its job runs, or the job that ended is not its own: it stays held", p.Name)
		err := evict(as(t, reaper), p, true)
		assert.True(t, apierrors.IsTooManyRequests(err), "%s's eviction is refused: %v", p.Name, err)
	}
	assert.Empty(t, append(r.gh.Errors(), r.gl.Errors()...), "every request had the published shape")

	// Ended by an eviction (an autoscaler's, a drain's): its record says
	// it was a zombie, and of which kind.
	require.NoError(t, evict(as(t, reaper), build, false))
	kubeletEnds(t, build, podtest.GitLab(ns, build.Name).Terminated("build", 143, "Error"))
	rec := oneDeath(t, build)
	assert.Equal(t, string(death.ZombieEnded), rec.Class, rec.ClassBasis)
	if assert.NotNil(t, rec.Zombie, "the record names the zombie") {
		assert.Equal(t, runnerpod.JobOverZombie, rec.Zombie.Kind)
	}
	assert.Empty(t, rec.Reports, "a zombie's end is no job's death: told nowhere")
}
