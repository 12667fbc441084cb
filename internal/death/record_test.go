package death

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func newRecord(t *testing.T, w *podtest.Wrapper) Record {
	t.Helper()
	pod := w.Obj()
	runner, ok := presets.Match(pod, configtest.Enforcing().Presets)
	require.True(t, ok)
	return New(pod, runner, runnerpod.RunnerStatus(pod, runner.Containers))
}

func TestNewRecordOfAnOOMKill(t *testing.T) {
	final := `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v1","oom":1,"oom_kill":1,"peak":67108864,"limit":67108864}`
	r := newRecord(t, podtest.ARCScaleSet("ci", "r").Node("n1").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final))
	start, end := metav1.NewTime(podtest.Start), metav1.NewTime(podtest.Start.Add(10*time.Minute))
	assert.Equal(t, Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{
		Pod: "r", UID: "uid-r", Node: "n1", Preset: "arc-scale-set",
		Container: "runner", ContainerID: "containerd://runner-1",
		ExitCode: ptr.To(int32(137)), Signal: 9, Reason: "OOMKilled", Class: string(CgroupOOM),
		StartedAt: &start, FinishedAt: &end,
		Vitals: &v1alpha1.Vitals{Cgroup: "v1", Scope: ScopePod,
			Memory: v1alpha1.Memory{OOM: 1, OOMKill: 1, Peak: ptr.To(int64(67108864)), Limit: ptr.To(int64(67108864))}},
		OOMConfirmed: ptr.To(true),
	}}, r)
	assert.Equal(t, "uid-r/containerd://runner-1", r.Key())
	o := r.Object()
	assert.Equal(t, "ci", o.Namespace)
	assert.Equal(t, ObjectName("r", r.Key()), o.Name, "the name is the death's, so a second writer gets AlreadyExists")
	assert.Equal(t, map[string]string{ClassLabel: "cgroup-oom", PodUIDLabel: "uid-r"}, o.Labels)
	assert.Equal(t, r, FromObject(o))
}

func TestTheRecordsVitalsAreTheRunnerContainersOwn(t *testing.T) {
	// The real ARC runner: OOM-killed at its 96Mi limit, on v1,
	// where the pod's cgroup (runner plus the 32Mi sidecar) counted no kill.
	final := `{"v":1,"ts":"2026-11-01T12:10:05Z","cg":"v1","oom":0,"oom_kill":1,"peak":109080576,"limit":134217728,"oom_watch":"polled",` +
		`"oom_kill_at":"2026-11-01T12:09:59.75Z","containers":{` +
		`"runner-1":{"peak":100663296,"limit":100663296,"oom":0,"oom_kill":1,"oom_kill_at":"2026-11-01T12:09:59.75Z"},` +
		`"vitals-1":{"peak":9437184,"limit":33554432,"oom":0,"oom_kill":0}}}`
	r := newRecord(t, podtest.ARCScaleSet("ci", "r").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final))
	at := metav1.NewTime(time.Date(2026, 11, 1, 12, 9, 59, 750_000_000, time.UTC))
	assert.Equal(t, &v1alpha1.Vitals{Cgroup: "v1", Scope: ScopeContainer, OOMWatch: "polled",
		Memory: v1alpha1.Memory{Peak: ptr.To(int64(96 << 20)), Limit: ptr.To(int64(96 << 20)), OOMKill: 1, OOMKillAt: &at},
		Pod:    &v1alpha1.Memory{Peak: ptr.To(int64(109080576)), Limit: ptr.To(int64(128 << 20)), OOMKill: 1, OOMKillAt: &at},
	}, r.Vitals, "the runner's own limit, peak, kill and its time; the pod's beside")
	assert.Equal(t, ptr.To(true), r.OOMConfirmed, "the container's own count confirms it")

	noOwn := `{"v":1,"ts":"2026-11-01T12:10:05Z","cg":"v2","oom":0,"oom_kill":0,"peak":1024,"containers":{"other-1":{"oom":0,"oom_kill":0}}}`
	r = newRecord(t, podtest.ARCScaleSet("ci", "r").Terminated("runner", 1, "Error").SidecarTerminated(runnerpod.VitalsContainer, noOwn))
	assert.Equal(t, ScopePod, r.Vitals.Scope, "the runner's cgroup was never seen: the pod's reading, said to be the pod's")
	assert.Nil(t, r.Vitals.Pod)
}

func TestWhatTheRunnersOwnVitalsSayOfAnOOM(t *testing.T) {
	own := func(cg string, container, pod int64) *v1alpha1.Vitals {
		v := &v1alpha1.Vitals{Cgroup: cg, Scope: ScopeContainer, Memory: v1alpha1.Memory{OOMKill: container}}
		if pod != container {
			v.Pod = &v1alpha1.Memory{OOMKill: pod}
		}
		return v
	}
	cases := []struct {
		name  string
		class Class
		v     *v1alpha1.Vitals
		want  *bool
	}{
		{name: "the runner's own kill confirms it", class: SigKill, v: own("v1", 1, 1), want: ptr.To(true)},
		{name: "no kill anywhere in a v2 pod refutes it", class: SigKill, v: own("v2", 0, 0), want: ptr.To(false)},
		{name: "a kill elsewhere in a v2 pod neither confirms nor refutes the runner's", class: SigKill, v: own("v2", 0, 1)},
		{name: "no kill counted on v1 proves nothing", class: CgroupOOM, v: own("v1", 0, 0)},
		{name: "a class that is no OOM's shape is not judged", class: ErrorExit, v: own("v2", 1, 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { assert.Equal(t, tc.want, oomConfirmed(tc.class, tc.v)) })
	}
}

func TestARecordKeepsTheRunnersLastWordsBounded(t *testing.T) {
	w := podtest.Runner("ci", "r").Terminated("runner", 1, "Error")
	w.Status.ContainerStatuses[0].State.Terminated.Message = "[RUNNER 2026-11-01 12:09:58Z ERR  JobDispatcher] agent quit"
	r := newRecord(t, w)
	assert.Equal(t, "[RUNNER 2026-11-01 12:09:58Z ERR  JobDispatcher] agent quit", r.Message)
	assert.False(t, r.MessageTruncated)

	w.Status.ContainerStatuses[0].State.Terminated.Message = strings.Repeat("é", MaxMessageBytes) + "the end"
	r = newRecord(t, w)
	assert.LessOrEqual(t, len(r.Message), MaxMessageBytes)
	assert.True(t, utf8.ValidString(r.Message), "cut at a character")
	assert.True(t, strings.HasSuffix(r.Message, "the end"), "the tail: the last words")
	assert.True(t, r.MessageTruncated)
}

// The kubelet writes ContainerStatusUnknown for a container it no longer
// finds (an evicted pod's, which it removes at once to reclaim its disk):
// its message is the kubelet's, not the runner's last words.
func TestARecordTakesNoLastWordsFromAContainerTheKubeletLost(t *testing.T) {
	w := podtest.Runner("ci", "r").Terminated("runner", 137, "ContainerStatusUnknown")
	w.Status.ContainerStatuses[0].State.Terminated.Message = "The container could not be located when the pod was deleted.  The container used to be Running"
	r := newRecord(t, w)
	assert.Empty(t, r.Message)
	assert.Equal(t, "ContainerStatusUnknown", r.Reason, "the record says the kubelet lost the container")
}

func TestVitalsRefuteAnOOMShapedSigkill(t *testing.T) {
	final := `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v2","oom":0,"oom_kill":0}`
	r := newRecord(t, podtest.Runner("ci", "r").Terminated("runner", 137, "Error").SidecarTerminated(runnerpod.VitalsContainer, final))
	assert.Equal(t, string(SigKill), r.Class)
	assert.Equal(t, ptr.To(false), r.OOMConfirmed, "no oom_kill counted: the SIGKILL came from elsewhere")
}

func TestRecordWithoutVitals(t *testing.T) {
	r := newRecord(t, podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").SidecarTerminated(runnerpod.VitalsContainer, "not json"))
	assert.Nil(t, r.Vitals, "a message the sidecar did not write is ignored")
	assert.Nil(t, r.OOMConfirmed)
	assert.Equal(t, string(CleanExit), r.Class)
}

func TestRecordOfARunnerDeletedWhileRunning(t *testing.T) {
	w := podtest.Runner("ci", "r").Running("runner")
	pod := w.Obj()
	runner, _ := presets.Match(pod, configtest.Enforcing().Presets)
	r := New(pod, runner, runnerpod.RunnerStatus(pod, runner.Containers))
	assert.Equal(t, string(DeletedRunning), r.Class)
	assert.Nil(t, r.ExitCode)
	assert.Equal(t, podtest.Start, r.StartedAt.Time)
}

func TestRecordOfARestartInPlaceUsesTheLastTermination(t *testing.T) {
	r := newRecord(t, podtest.Runner("ci", "r").Restarting("runner", 139, "Error"))
	assert.Equal(t, string(Crash), r.Class)
	assert.Equal(t, int32(1), r.Restarts)
	assert.Equal(t, int32(11), r.Signal)
}

func TestNoOOMCountOnCgroupV1ProvesNothing(t *testing.T) {
	final := `{"v":1,"ts":"2026-11-01T12:10:00Z","cg":"v1","oom":0,"oom_kill":0}`
	r := newRecord(t, podtest.Runner("ci", "r").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final))
	assert.Equal(t, string(CgroupOOM), r.Class)
	assert.Nil(t, r.OOMConfirmed, "v1 counts a kill only in the victim's cgroup, which may be gone before the sidecar read it")
}

func TestEndingNamesWhoStartedWhatTheDeleterCarriedOut(t *testing.T) {
	rec := func(class Class, rule, startedBy string) Record {
		return Record{DeathRecord: v1alpha1.DeathRecord{Class: string(class), Deleted: true, DeletedBy: "arc", DeleteRule: rule, StartedBy: startedBy}}
	}
	for _, tc := range []struct {
		name string
		r    Record
		want string
	}{
		{"ARC's delete after the job was over", rec(JobEnded, string(runnerpod.RuleJobOver), "alice"),
			"its fleet said the job was over when arc deleted its pod, on the deletion of its EphemeralRunner by alice"},
		{"an idle runner's pod deleted for someone else", rec(SigTerm, "idle", "alice"),
			"ended by its pod's deletion, requested by arc (allowed: idle), on the deletion of its EphemeralRunner by alice"},
		{"a deleter acting on its own", rec(SigTerm, "idle", ""), "ended by its pod's deletion, requested by arc (allowed: idle)"},
		{"an idle runner its fleet removed", rec(IdleRemoved, string(runnerpod.RuleIdle), "arc-listener"),
			"it had no job when arc deleted its pod, on the deletion of its EphemeralRunner by arc-listener"},
		{"an override's reason is said", Record{DeathRecord: v1alpha1.DeathRecord{Class: string(SigTerm), Deleted: true, DeletedBy: "alice", DeleteRule: "override", DeleteReason: "node pool upgrade"}},
			`ended by its pod's deletion, requested by alice (allowed: override), reason "node pool upgrade"`},
		{"a platform's drain once the node's drain deadline passed names who set the deadline", rec(SigTerm, string(runnerpod.RuleNodeDrain), "alice"),
			"ended by its pod's deletion, requested by arc once its node's drain deadline (runnerguard.io/drain-deadline) had passed, set by alice"},
	} {
		assert.Equal(t, tc.want, tc.r.Ending(), tc.name)
	}
}

// The job's start, apart from the runner's, where the cluster can tell it.
func TestTheRecordTellsTheJobsStartFromTheRunners(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *podtest.Wrapper
		want *time.Time
	}{
		{"ARC: when the leader saw the EphemeralRunner turn busy",
			podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").Annotate(runnerpod.JobAssignedAt, "2026-11-01T12:03:00Z"),
			ptr.To(time.Date(2026, 11, 1, 12, 3, 0, 0, time.UTC))},
		{"ARC: not seen, not said", podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error"), nil},
		{"ARC: a value that is no time is not said",
			podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error").Annotate(runnerpod.JobAssignedAt, "soon"), nil},
		{"GitLab: the build pod's start", podtest.GitLab("ci", "g").ActiveDeadline(3600, podtest.Start).Terminated("build", 137, "Error"), ptr.To(podtest.Start)},
		{"a generic runner's job start is its own", podtest.Runner("ci", "r").Terminated("runner", 1, "Error").Annotate(runnerpod.JobAssignedAt, "2026-11-01T12:03:00Z"), nil},
	} {
		r := newRecord(t, tc.pod)
		if tc.want == nil {
			assert.Nil(t, r.JobStartedAt, tc.name)
			continue
		}
		require.NotNil(t, r.JobStartedAt, tc.name)
		assert.True(t, tc.want.Equal(r.JobStartedAt.Time), tc.name)
	}
}

// What the guard refused while the runner ran goes onto its record as the
// pod carried it.
func TestTheRecordCarriesThePodsRefusals(t *testing.T) {
	at := metav1.NewMicroTime(time.Date(2026, 11, 1, 12, 3, 0, 0, time.UTC))
	stored := v1alpha1.Refusals{Entries: []v1alpha1.Refusal{{By: "system:serviceaccount:ci:reaper", Verb: "delete", Rule: "busy", First: at, Last: at, Count: 2}}}
	value, err := refusal.Format(stored)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		pod  *podtest.Wrapper
		want *v1alpha1.Refusals
	}{
		{"refusals on the pod are copied", podtest.Runner("ci", "r").Terminated("runner", 1, "Error").Annotate(refusal.Annotation, value), &stored},
		{"no refusals, none said", podtest.Runner("ci", "r").Terminated("runner", 1, "Error"), nil},
		{"a value that does not parse is told as lost", podtest.Runner("ci", "r").Terminated("runner", 1, "Error").Annotate(refusal.Annotation, "{"),
			&v1alpha1.Refusals{Dropped: 1}},
	} {
		r := newRecord(t, tc.pod)
		if tc.want == nil {
			assert.Nil(t, r.Refusals, tc.name)
			continue
		}
		require.NotNil(t, r.Refusals, tc.name)
		got, _ := refusal.Format(*r.Refusals)
		want, _ := refusal.Format(*tc.want)
		assert.Equal(t, want, got, tc.name)
	}
}
