//go:build fleets

package fleets

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/woodpecker"
)

// TestWoodpeckerAgent runs Woodpecker's real agent (built by
// hack/fleets/woodpecker.sh, its Kubernetes backend, on the host with a
// token of its ServiceAccount bound to its pod in the steps' namespace)
// with workflows from a stand-in server (package woodpeckerapi), side by
// side, and checks that each step's pod gets the one record
// docs/install/fleets.md "Woodpecker CI" promises.
func TestWoodpeckerAgent(t *testing.T) {
	f := startWoodpecker(t)
	// The OOM is a death; the clean exits (two steps, the reaped step),
	// the cancel and the timeout are job ends.
	runCases(t, f, f.ns, "workflows", []fleetCase[*woodpeckerFleet]{
		{"a workflow that succeeds is a clean exit of each step's pod", woodpeckerSuccess},
		{"a reaper's delete and eviction of a running step are refused and it succeeds", woodpeckerReaped},
		{"a cancelled workflow's step is ended by the agent's delete", woodpeckerCancel},
		{"a step killed at its memory limit is one OOM record", woodpeckerOOM},
		{"a workflow past its timeout is ended by the agent's delete", woodpeckerTimeout},
	}, "1 runner death and 5 job ends on record")
}

func woodpeckerSuccess(t *testing.T, f *woodpeckerFleet) {
	id := "101"
	pods := f.queue(t, id, 0, wpStep{Name: "build", Commands: []string{"echo building", "sleep 3"}},
		wpStep{Name: "test", Commands: []string{"echo testing", "sleep 3"}})
	build := f.stepPod(t, pods["build"])
	f.created(t, build, "build", id)
	test := f.stepPod(t, pods["test"])
	f.created(t, test, "test", id)
	st := f.done(t, id)
	assert.False(t, st.Canceled)
	assert.Empty(t, st.Error)
	for i, pod := range []podRef{build, test} {
		if assert.Len(t, st.Steps, 2) {
			assert.True(t, st.Steps[i].Exited)
			assert.Equal(t, int32(0), st.Steps[i].ExitCode)
		}
		gone(t, pod) // the agent deletes a step's pod when the step ends
		r := f.oneRecord(t, []string{"build", "test"}[i], id, pod)
		assert.Equal(t, string(death.CleanExit), r.Class, r.ClassBasis)
		assert.Nil(t, r.Refusals)
		whyOf(t, pod, r)
	}
}

// woodpeckerReaped: a ServiceAccount with edit deletes, then evicts, the
// pod of a running step; both are refused and the step runs on.
func woodpeckerReaped(t *testing.T, f *woodpeckerFleet) {
	id := "102"
	pods := f.queue(t, id, 0, wpStep{Name: "build", Commands: []string{"echo building", "sleep 25"}})
	pod := f.stepPod(t, pods["build"])
	f.created(t, pod, "build", id)
	reaperUser := "system:serviceaccount:" + f.ns + ":" + tektonReaperSA
	err := deleteAndEvictRefused(t, f.reaper, reaperUser, pod, "a running step's pod")
	assert.Contains(t, err.Error(), `"`+pod.name+`"`, "the answer names the step's container")
	st := f.done(t, id)
	assert.False(t, st.Canceled)
	assert.Empty(t, st.Error)
	if assert.Len(t, st.Steps, 1) {
		assert.Equal(t, int32(0), st.Steps[0].ExitCode)
		assert.Contains(t, st.Steps[0].Log, "building")
	}
	r := f.oneRecord(t, "build", id, pod)
	assert.Equal(t, string(death.CleanExit), r.Class, r.ClassBasis)
	assertDeleteAndEvictionRefused(t, r, reaperUser)
}

// woodpeckerCancel: the server answers the agent's Wait with canceled;
// the agent deletes the step's pod.
func woodpeckerCancel(t *testing.T, f *woodpeckerFleet) {
	id := "103"
	pods := f.queue(t, id, 0, wpStep{Name: "build", Commands: []string{"echo building", "sleep 600"}})
	pod := f.stepPod(t, pods["build"])
	f.created(t, pod, "build", id)
	time.Sleep(2 * time.Second)
	f.cancel(t, id)
	gone(t, pod)
	st := f.done(t, id)
	assert.True(t, st.Canceled, "the agent reports the workflow canceled")
	r := f.oneRecord(t, "build", id, pod)
	assert.Equal(t, string(death.JobEnded), r.Class, r.ClassBasis)
	assertEndedByOwner(t, r, f.agentUser)
	assert.Equal(t, death.OutcomeUnknown, r.ClassBasis)
	assert.Contains(t, whyOf(t, pod, r), "the job's outcome is unknown to the cluster")
}

// woodpeckerOOM: the kernel kills dd, the step's biggest process, at the
// limit the step's backend options set; the step's shell exits 137 and
// the runtime reports OOMKilled.
func woodpeckerOOM(t *testing.T, f *woodpeckerFleet) {
	id := "104"
	pods := f.queue(t, id, 0, wpStep{Name: "build", MemoryLimit: "96Mi",
		Commands: []string{"echo building", "sleep 2", "dd if=/dev/zero of=/dev/null bs=200M count=1"}})
	pod := f.stepPod(t, pods["build"])
	f.created(t, pod, "build", id)
	st := f.done(t, id)
	if assert.Len(t, st.Steps, 1) {
		assert.Equal(t, int32(137), st.Steps[0].ExitCode, "the step's exit, as the agent reported it")
	}
	r := f.oneRecord(t, "build", id, pod)
	assert.Equal(t, string(death.CgroupOOM), r.Class, r.ClassBasis)
	assert.Equal(t, "OOMKilled", r.Reason, "the runtime's reason")
	if assert.NotNil(t, r.ExitCode) {
		assert.Equal(t, int32(137), *r.ExitCode)
	}
	assert.True(t, r.OOMConfirmed != nil && *r.OOMConfirmed, "the OOM is confirmed")
	if v := r.Vitals; assert.NotNil(t, v, "the vitals' last reading") {
		t.Logf("vitals: %d OOM kills (watch %s), first at %v; peak %s (unknown %v), limit %s",
			v.OOMKill, v.OOMWatch, v.OOMKillAt, orNone(v.Peak), v.PeakUnknown, orNone(v.Limit))
		assert.GreaterOrEqual(t, v.OOMKill, int64(1), "OOM kills counted")
		if assert.NotNil(t, v.Limit) {
			assert.Equal(t, int64(96<<20), *v.Limit, "the step's own limit")
		}
	}
	assert.Nil(t, r.Refusals)
	whyOf(t, pod, r)
}

// woodpeckerTimeout: the agent ends the workflow at its timeout (one
// minute, the least the server's minutes can say) and deletes the step's
// pod. The pod carries no deadline, so runnerguard cannot tell a timeout
// from a cancel: job-ended.
func woodpeckerTimeout(t *testing.T, f *woodpeckerFleet) {
	id := "105"
	pods := f.queue(t, id, 1, wpStep{Name: "build", Commands: []string{"echo building", "sleep 600"}})
	pod := f.stepPod(t, pods["build"])
	f.created(t, pod, "build", id)
	gone(t, pod)
	st := f.done(t, id)
	r := f.oneRecord(t, "build", id, pod)
	assert.Equal(t, string(death.JobEnded), r.Class, r.ClassBasis)
	assertEndedByOwner(t, r, f.agentUser)
	if assert.NotNil(t, r.DeletedAt) {
		ran := r.DeletedAt.Sub(pod.startTime.Time)
		assert.True(t, ran > 40*time.Second && ran < 90*time.Second, "deleted %v after the pod's start, at the minute's timeout", ran)
	}
	whyOf(t, pod, r)
	t.Logf("the agent reported the timed-out workflow canceled %v, error %q", st.Canceled, st.Error)
}

// created checks what the injector recorded of the pod: the agent made
// it, and the preset is Woodpecker's; and the backend's labels.
func (f *woodpeckerFleet) created(t *testing.T, pod podRef, step, id string) {
	t.Helper()
	p := assertCreated(t, pod, f.agentUser, string(woodpecker.Name))
	assert.Equal(t, step, p.Labels[woodpecker.StepLabel])
	assert.Equal(t, id, p.Labels[woodpecker.TaskUUIDLabel])
}

// oneRecord waits for the record of the step's pod, checks that it is the
// only one and names the step, the workflow and the repository, and
// returns it.
func (f *woodpeckerFleet) oneRecord(t *testing.T, step, id string, pod podRef) death.Record {
	t.Helper()
	r := onlyRecord(t, pod, "step "+step+" of workflow "+id)
	assert.Equal(t, string(woodpecker.Name), r.Preset)
	assert.Equal(t, pod.name, r.Container, "the step's one container, named as its pod")
	if assert.NotNil(t, r.Job, "the record names the step") {
		assert.Equal(t, step, r.Job.Name, "the step")
		assert.Equal(t, id, r.Job.ID, "the workflow")
		assert.Equal(t, "acme/app", r.Job.Project, "the repository, as the step's CI_REPO names it")
		assert.Equal(t, "9fceb02d0ae598e95dc970b74767f19372d61af8", r.Job.Commit, "the commit, as the injector copied CI_COMMIT_SHA (woodpeckerapi.CommitSHA)")
		assert.Equal(t, "github", r.Job.Forge, "the forge, as the server's label names it")
		assert.Equal(t, "700123", r.Job.RepositoryID, "the repository's forge id, as the server's label names it (woodpeckerapi.RepoForgeID)")
	}
	assertTimes(t, pod, r)
	return r
}
