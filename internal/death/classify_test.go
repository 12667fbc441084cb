package death

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/podtest"
)

func TestClassify(t *testing.T) {
	cases := []struct {
		name      string
		podReason string
		exit      int32
		signal    int32
		reason    string
		noState   bool
		// disruption is the reason of a true DisruptionTarget condition.
		disruption string
		want       Class
	}{
		{name: "exit 0 Completed is a clean exit", exit: 0, reason: "Completed", want: CleanExit},
		{name: "OOMKilled is a cgroup OOM", exit: 137, reason: "OOMKilled", want: CgroupOOM},
		{name: "OOMKilled with exit 0 (a child was killed) is still a cgroup OOM", exit: 0, reason: "OOMKilled", want: CgroupOOM},
		{name: "137 Error is a SIGKILL", exit: 137, reason: "Error", want: SigKill},
		{name: "143 Error is a SIGTERM", exit: 143, reason: "Error", want: SigTerm},
		{name: "a reported signal 15 is a SIGTERM whatever the code", exit: 1, signal: 15, reason: "Error", want: SigTerm},
		{name: "a literal 9 is an external kill", exit: 9, reason: "Error", want: ExternalKill},
		{name: "139 is a crash (segfault)", exit: 139, reason: "Error", want: Crash},
		{name: "134 is a crash (abort)", exit: 134, reason: "Error", want: Crash},
		{name: "any other code is the runner's own error", exit: 2, reason: "Error", want: ErrorExit},
		{name: "exit 1 is an error exit", exit: 1, reason: "Error", want: ErrorExit},
		{name: "an evicted pod is a node eviction whatever the code", podReason: "Evicted", exit: 137, reason: "Error", want: NodeEviction},
		{name: "an evicted pod without a container state is a node eviction", podReason: "Evicted", noState: true, want: NodeEviction},
		{name: "ContainerStatusUnknown is a lost node", exit: 137, reason: "ContainerStatusUnknown", want: NodeLost},
		{name: "a NodeLost pod is a lost node", podReason: "NodeLost", exit: 0, reason: "Completed", want: NodeLost},
		{name: "no terminated state yet means deleted while running", noState: true, want: DeletedRunning},
		{name: "removed by pod GC after its node went is a lost node", noState: true, disruption: "DeletionByPodGC", want: NodeLost},
		{name: "an eviction's disruption condition does not hide the runner's own end", disruption: "EvictionByEvictionAPI", exit: 143, reason: "Error", want: SigTerm},
		{name: "pod GC's condition does not override a reported end", disruption: "DeletionByPodGC", exit: 0, reason: "Completed", want: CleanExit},
		{name: "activeDeadlineSeconds ran out is a job timeout, not a signal", podReason: "DeadlineExceeded", exit: 137, reason: "Error", want: JobTimeout},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := podtest.Runner("ci", "r").Reason(tc.podReason).Obj()
			if tc.disruption != "" {
				pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: tc.disruption})
			}
			var term *corev1.ContainerStateTerminated
			if !tc.noState {
				term = &corev1.ContainerStateTerminated{ExitCode: tc.exit, Signal: tc.signal, Reason: tc.reason}
			}
			assert.Equal(t, tc.want, Classify(pod, term))
		})
	}
}

func TestSignal(t *testing.T) {
	assert.Equal(t, int32(9), Signal(&corev1.ContainerStateTerminated{ExitCode: 137}), "137 is 128+9")
	assert.Equal(t, int32(15), Signal(&corev1.ContainerStateTerminated{ExitCode: 143}), "143 is 128+15")
	assert.Equal(t, int32(0), Signal(&corev1.ContainerStateTerminated{ExitCode: 9}), "a literal 9 is an exit code, not a signal")
	assert.Equal(t, int32(0), Signal(&corev1.ContainerStateTerminated{ExitCode: 255}), "255 is past the signal range")
	assert.Equal(t, int32(6), Signal(&corev1.ContainerStateTerminated{ExitCode: 1, Signal: 6}), "a reported signal wins")
	assert.Equal(t, int32(0), Signal(nil))
}
