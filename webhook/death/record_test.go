package death

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/vitals/record"
	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/podtest"
	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

func newRecord(t *testing.T, w *podtest.Wrapper, deletedBy string) Record {
	t.Helper()
	pod := w.Obj()
	runner, ok := runnerpod.Match(pod, config.Default().Presets)
	require.True(t, ok)
	return New(pod, runner, runnerpod.RunnerStatus(pod, runner.Containers), deletedBy)
}

func TestNewRecordOfAnOOMKill(t *testing.T) {
	final := `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v1","oom":1,"oom_kill":1,"peak":67108864,"limit":67108864}`
	r := newRecord(t, podtest.ARCScaleSet("ci", "r").Node("n1").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final), "reaper")
	start, end := podtest.Start, podtest.Start.Add(10*time.Minute)
	assert.Equal(t, Record{
		Namespace: "ci", Pod: "r", UID: "uid-r", Node: "n1", Preset: "arc-scale-set",
		Container: "runner", ContainerID: "containerd://runner-1",
		ExitCode: ptr.To(int32(137)), Signal: 9, Reason: "OOMKilled", Class: CgroupOOM,
		StartedAt: &start, FinishedAt: &end, DeletedBy: "reaper",
		Vitals: &record.Final{V: 1, Time: time.Date(2026, 11, 1, 12, 10, 0, 0, time.UTC), Cgroup: "v1", OOM: 1, OOMKill: 1,
			Peak: ptr.To(uint64(67108864)), Limit: ptr.To(uint64(67108864))},
		OOMConfirmed: ptr.To(true),
	}, r)
	assert.Equal(t, "uid-r/containerd://runner-1", r.Key())
}

func TestVitalsRefuteAnOOMShapedSigkill(t *testing.T) {
	final := `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v2","oom":0,"oom_kill":0}`
	r := newRecord(t, podtest.Runner("ci", "r").Terminated("runner", 137, "Error").SidecarTerminated(runnerpod.VitalsContainer, final), "")
	assert.Equal(t, SigKill, r.Class)
	assert.Equal(t, ptr.To(false), r.OOMConfirmed, "no oom_kill counted: the SIGKILL came from elsewhere")
}

func TestRecordWithoutVitals(t *testing.T) {
	r := newRecord(t, podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").SidecarTerminated(runnerpod.VitalsContainer, "not json"), "")
	assert.Nil(t, r.Vitals, "a message the sidecar did not write is ignored")
	assert.Nil(t, r.OOMConfirmed)
	assert.Equal(t, CleanExit, r.Class)
}

func TestRecordOfARunnerDeletedWhileRunning(t *testing.T) {
	w := podtest.Runner("ci", "r").Running("runner")
	pod := w.Obj()
	runner, _ := runnerpod.Match(pod, config.Default().Presets)
	r := New(pod, runner, runnerpod.RunnerStatus(pod, runner.Containers), "admin")
	assert.Equal(t, DeletedRunning, r.Class)
	assert.Nil(t, r.ExitCode)
	assert.Equal(t, &podtest.Start, r.StartedAt)
	assert.Equal(t, "admin", r.DeletedBy)
}

func TestRecordOfARestartInPlaceUsesTheLastTermination(t *testing.T) {
	r := newRecord(t, podtest.Runner("ci", "r").Restarting("runner", 139, "Error"), "")
	assert.Equal(t, Crash, r.Class)
	assert.Equal(t, int32(1), r.Restarts)
	assert.Equal(t, int32(11), r.Signal)
}

func TestNoOOMCountOnCgroupV1ProvesNothing(t *testing.T) {
	final := `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v1","oom":0,"oom_kill":0}`
	r := newRecord(t, podtest.Runner("ci", "r").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final), "")
	assert.Equal(t, CgroupOOM, r.Class)
	assert.Nil(t, r.OOMConfirmed, "v1 counts a kill only in the victim's cgroup, which may be gone before the sidecar read it")
}
