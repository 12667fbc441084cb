//go:build fleets

package fleets

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/tekton"
)

// TestTektonPipelines runs Tekton's real controller (built by
// hack/fleets/tekton.sh, installed after runnerguard) with TaskRuns in an
// opted-in namespace, side by side, and checks that each TaskRun's pod
// gets the one record docs/install/fleets.md "Tekton Pipelines" promises.
func TestTektonPipelines(t *testing.T) {
	f := startTekton(t)
	// The OOM and the timeout are deaths; the clean exits and the cancel
	// are job ends.
	runCases(t, f, f.ns, "taskruns", []fleetCase[*tektonFleet]{
		{"a TaskRun that succeeds is one clean exit, its last step's", tektonSuccess},
		{"a reaper's delete and eviction of a running TaskRun are refused and it succeeds", tektonReaped},
		{"a cancelled TaskRun is ended by the controller's delete", tektonCancel},
		{"a step killed at its memory limit is one OOM record, the step's", tektonOOM},
		{"a TaskRun past its timeout is ended by the controller's delete", tektonTimeout},
		{"a PipelineRun's TaskRun names the PipelineRun as its project", tektonPipelineRun},
	}, "2 runner deaths and 4 job ends on record")
}

func tektonSuccess(t *testing.T, f *tektonFleet) {
	name := "build-ok"
	f.createTaskRun(t, name, "", step{"build", "echo building; sleep 3"}, step{"test", "echo testing; sleep 3"})
	pod := f.taskRunPod(t, name, "build")
	f.created(t, pod)
	status, reason := f.taskRunDone(t, name)
	assert.Equal(t, "True/Succeeded", status+"/"+reason)
	r := f.oneRecord(t, name, "", pod)
	assert.Equal(t, string(death.CleanExit), r.Class, r.ClassBasis)
	assert.Equal(t, "step-test", r.Container, "the last step")
	assert.Nil(t, r.Refusals)
	whyOf(t, pod, r)
}

// tektonReaped: a ServiceAccount with edit deletes, then evicts, the pod
// of a running TaskRun; both are refused and the TaskRun runs on.
func tektonReaped(t *testing.T, f *tektonFleet) {
	name := "build-reaped"
	f.createTaskRun(t, name, "", step{"build", "echo building; sleep 25"})
	pod := f.taskRunPod(t, name, "build")
	f.created(t, pod)
	reaperUser := "system:serviceaccount:" + f.ns + ":" + tektonReaperSA
	err := deleteAndEvictRefused(t, f.reaper, reaperUser, pod, "a running TaskRun's pod")
	assert.Contains(t, err.Error(), `"step-build"`, "the answer names the step under way")
	status, reason := f.taskRunDone(t, name)
	assert.Equal(t, "True/Succeeded", status+"/"+reason)
	r := f.oneRecord(t, name, "", pod)
	assert.Equal(t, string(death.CleanExit), r.Class, r.ClassBasis)
	assert.Equal(t, "step-build", r.Container)
	assertDeleteAndEvictionRefused(t, r, reaperUser)
}

func tektonCancel(t *testing.T, f *tektonFleet) {
	name := "build-cancelled"
	f.createTaskRun(t, name, "", step{"build", "echo building; sleep 600"})
	pod := f.taskRunPod(t, name, "build")
	f.created(t, pod)
	time.Sleep(2 * time.Second)
	f.cancel(t, name)
	gone(t, pod)
	status, reason := f.taskRunDone(t, name)
	assert.Equal(t, "False/TaskRunCancelled", status+"/"+reason)
	r := f.oneRecord(t, name, "", pod)
	assert.Equal(t, string(death.JobEnded), r.Class, r.ClassBasis)
	assert.Equal(t, "step-build", r.Container)
	assertEndedByOwner(t, r, tektonControllerUser)
	assert.Equal(t, death.OutcomeUnknown, r.ClassBasis)
	assert.Contains(t, whyOf(t, pod, r), "the job's outcome is unknown to the cluster")
	require.Eventually(t, func() bool {
		list, err := cs.EventsV1().Events(pod.namespace).List(context.Background(), metav1.ListOptions{})
		return err == nil && slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
			return e.Regarding.Kind == "TaskRun" && e.Regarding.Name == name && e.Reason == death.ReasonJobEnded
		})
	}, time.Minute, time.Second, "the TaskRun's end told on the TaskRun, where tkn taskrun describe shows it")
}

// tektonOOM: the kernel kills dd, the step's biggest process; the step's
// shell exits 137 at once and the entrypoint with it, and the runtime,
// which saw the cgroup's OOM event, reports OOMKilled: the kill ended the
// step (cgroup-oom), and Tekton skips the step after it.
func tektonOOM(t *testing.T, f *tektonFleet) {
	name := "build-oom"
	f.createTaskRun(t, name, "", step{"build", "echo building; sleep 2; dd if=/dev/zero of=/dev/null bs=200M count=1"},
		step{"test", "echo testing"})
	pod := f.taskRunPod(t, name, "build")
	f.created(t, pod)
	status, reason := f.taskRunDone(t, name)
	assert.Equal(t, "False/StepOOM", status+"/"+reason, "Tekton's reason for a step the runtime reports OOMKilled")
	r := f.oneRecord(t, name, "", pod)
	assert.Equal(t, string(death.CgroupOOM), r.Class, r.ClassBasis)
	assert.Equal(t, "step-build", r.Container, "the step that ran out of memory, not the one skipped after it")
	assert.Equal(t, "OOMKilled", r.Reason, "the runtime's reason")
	if assert.NotNil(t, r.ExitCode) {
		assert.Equal(t, int32(137), *r.ExitCode)
	}
	assert.True(t, r.OOMConfirmed != nil && *r.OOMConfirmed, "the OOM is confirmed")
	assert.Nil(t, r.DeletedAt, "no deletion ended the step")
	if v := r.Vitals; assert.NotNil(t, v, "the vitals' last reading") {
		t.Logf("vitals: %d OOM kills (watch %s), first at %v; peak %s (unknown %v), limit %s",
			v.OOMKill, v.OOMWatch, v.OOMKillAt, orNone(v.Peak), v.PeakUnknown, orNone(v.Limit))
		assert.GreaterOrEqual(t, v.OOMKill, int64(1), "OOM kills counted")
		if assert.NotNil(t, v.Limit) {
			assert.Equal(t, int64(96<<20), *v.Limit, "the step's own limit")
		}
	}
	assert.Nil(t, r.Refusals)
	assert.Contains(t, whyOf(t, pod, r), "and ended with the container, at the OOM kill\n")
}

// tektonTimeout: the controller deletes the pod at the TaskRun's timeout.
// The pod's deadline is 1.5 times it (22s from the pod's start), so the
// delete comes within runnerguard's 10s of it: job-timeout; a pod that
// started late would make it job-ended.
func tektonTimeout(t *testing.T, f *tektonFleet) {
	name := "build-timeout"
	f.createTaskRun(t, name, "15s", step{"build", "echo building; sleep 600"})
	pod := f.taskRunPod(t, name, "build")
	f.created(t, pod)
	gone(t, pod)
	status, reason := f.taskRunDone(t, name)
	assert.Equal(t, "False/TaskRunTimeout", status+"/"+reason)
	r := f.oneRecord(t, name, "", pod)
	assert.Contains(t, []string{string(death.JobEnded), string(death.JobTimeout)}, r.Class, r.ClassBasis)
	assert.Equal(t, "step-build", r.Container)
	assertEndedByOwner(t, r, tektonControllerUser)
	whyOf(t, pod, r)
}

func tektonPipelineRun(t *testing.T, f *tektonFleet) {
	f.createPipelineRun(t, "release-42", "build", "echo building; sleep 3")
	name := "release-42-build" // the PipelineRun's name and the task's
	pod := f.taskRunPod(t, name, "build")
	f.created(t, pod)
	status, reason := f.taskRunDone(t, name)
	assert.Equal(t, "True/Succeeded", status+"/"+reason)
	r := f.oneRecord(t, name, "release-42", pod)
	assert.Equal(t, string(death.CleanExit), r.Class, r.ClassBasis)
	assert.Equal(t, "step-build", r.Container)
}

// created checks what the injector recorded of the pod: the controller
// made it, and the preset is Tekton's.
func (f *tektonFleet) created(t *testing.T, pod podRef) {
	t.Helper()
	assertCreated(t, pod, tektonControllerUser, string(tekton.Name))
}

// oneRecord waits for the record of TaskRun name's pod, checks that it
// is the only one and names the TaskRun, of PipelineRun project ("" for
// none), and returns it.
func (f *tektonFleet) oneRecord(t *testing.T, name, project string, pod podRef) death.Record {
	t.Helper()
	r := onlyRecord(t, pod, "TaskRun "+name)
	assert.Equal(t, string(tekton.Name), r.Preset)
	tr, err := f.taskRun(name)
	require.NoError(t, err)
	if assert.NotNil(t, r.Job, "the record names the TaskRun") {
		assert.Equal(t, name, r.Job.Name)
		assert.Equal(t, string(tr.GetUID()), r.Job.ID, "the TaskRun's UID")
		assert.Equal(t, project, r.Job.Project, "the PipelineRun")
	}
	assertTimes(t, pod, r)
	// Tekton's own account, which the callers waited for, is kept beside
	// the class once Tekton gave it.
	status, reason := succeeded(tr)
	require.Eventually(t, func() bool { return deathRecords(t, pod)[0].FleetView != nil }, 2*time.Minute+10*time.Second, time.Second,
		"Tekton's own account of TaskRun %s on its record", name)
	if v := deathRecords(t, pod)[0].FleetView; assert.NotNil(t, v) {
		assert.Equal(t, "TaskRun/"+name, v.Object)
		assert.Equal(t, status+"/"+reason, v.Status+"/"+v.Reason, "the TaskRun's Succeeded condition, as Tekton wrote it")
	}
	return r
}

func ptrStr(p *int32) string {
	if p == nil {
		return "none"
	}
	return strconv.Itoa(int(*p))
}

// logTaskRuns logs the TaskRuns and pods left, for a failed run.
