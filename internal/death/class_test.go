package death

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
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
		podMessage string
		// probed: the runner has a liveness probe; deleting: its pod's
		// deletion began before it ended.
		probed, deleting bool
		want             Class
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
		{name: "removed by pod GC after its node went is a lost node", noState: true, deleting: true, disruption: "DeletionByPodGC", want: NodeLost},
		{name: "an eviction's disruption condition does not hide the runner's own end", disruption: "EvictionByEvictionAPI", exit: 143, reason: "Error", want: SigTerm},
		{name: "pod GC's condition does not override a reported end", disruption: "DeletionByPodGC", exit: 0, reason: "Completed", want: CleanExit},
		{name: "activeDeadlineSeconds ran out is a job timeout, not a signal", podReason: "DeadlineExceeded", exit: 137, reason: "Error", want: JobTimeout},
		{name: "a kill of a probed runner in a pod nobody deletes is the kubelet's probe kill", probed: true, exit: 137, reason: "Error", want: ProbeKill},
		{name: "a probed runner that handled the probe kill's SIGTERM is a probe kill", probed: true, exit: 143, reason: "Error", want: ProbeKill},
		{name: "a kill of a probed runner while its pod is deleted is the deletion's", probed: true, deleting: true, exit: 143, reason: "Error", want: SigTerm},
		{name: "a kill of a runner without a liveness probe stays a SIGKILL", exit: 137, reason: "Error", want: SigKill},
		{name: "a probed runner's own error exit is not a probe kill", probed: true, exit: 1, reason: "Error", want: ErrorExit},
		{name: "a probed runner OOM-killed is an OOM, not a probe kill", probed: true, exit: 137, reason: "OOMKilled", want: CgroupOOM},
		{name: "a probed runner killed in a disrupted pod is not a probe kill", probed: true, disruption: "EvictionByEvictionAPI", exit: 143, reason: "Error", want: SigTerm},
		{name: "an eviction for a container's own ephemeral-storage limit is a storage eviction", podReason: "Evicted",
			podMessage: `Container runner exceeded its local ephemeral storage limit "1Gi". `, exit: 137, reason: "Error", want: StorageEviction},
		{name: "an eviction for the pod's ephemeral-storage total is a storage eviction", podReason: "Evicted",
			podMessage: "Pod ephemeral local storage usage exceeds the total limit of containers 2Gi. ", noState: true, want: StorageEviction},
		{name: "an eviction for an emptyDir's size limit is a storage eviction", podReason: "Evicted",
			podMessage: `Usage of EmptyDir volume "work" exceeds the limit "1Gi". `, exit: 143, reason: "Error", want: StorageEviction},
		{name: "an eviction under the node's memory pressure is a node eviction", podReason: "Evicted",
			podMessage: "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. ", exit: 137, reason: "Error", want: NodeEviction},
		{name: "an eviction under the node's disk pressure is a node eviction", podReason: "Evicted",
			podMessage: "The node was low on resource: ephemeral-storage. Threshold quantity: 1Gi, available: 500Mi. ", exit: 137, reason: "Error", want: NodeEviction},
		{name: "a runner killed for a preemption is preempted", disruption: "PreemptionByScheduler", deleting: true, exit: 143, reason: "Error", want: Preempted},
		{name: "a runner removed at once for a preemption is preempted", disruption: "PreemptionByScheduler", deleting: true, noState: true, want: Preempted},
		{name: "a runner killed with a preemption's condition but no deletion is not preempted", disruption: "PreemptionByScheduler", exit: 143, reason: "Error", want: SigTerm},
		{name: "a preempted runner that exited cleanly is a clean exit", disruption: "PreemptionByScheduler", exit: 0, reason: "Completed", want: CleanExit},
		{name: "a graceful node shutdown is a node disruption", podReason: "Terminated", disruption: "TerminationByKubelet",
			podMessage: "Pod was terminated in response to imminent node shutdown.", exit: 143, reason: "Error", want: NodeDisrupted},
		{name: "a pod reason Terminated without the kubelet's condition decides nothing", podReason: "Terminated", exit: 143, reason: "Error", want: SigTerm},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := podtest.Runner("ci", "r").Reason(tc.podReason).Obj()
			pod.Status.Message = tc.podMessage
			if tc.probed {
				pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{PeriodSeconds: 10}
			}
			if tc.deleting {
				pod.DeletionTimestamp = &metav1.Time{Time: podtest.Start.Add(5 * time.Minute)}
			}
			if tc.disruption != "" {
				// Set as the control plane sets it: just before the
				// deletion that carries it out.
				pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: tc.disruption,
					LastTransitionTime: metav1.Time{Time: podtest.Start.Add(5*time.Minute - time.Second)}})
			}
			var term *corev1.ContainerStateTerminated
			if !tc.noState {
				term = &corev1.ContainerStateTerminated{ExitCode: tc.exit, Signal: tc.signal, Reason: tc.reason,
					FinishedAt: metav1.Time{Time: podtest.Start.Add(10 * time.Minute)}}
			}
			assert.Equal(t, tc.want, Classify(pod, "runner", term))
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

func TestEvictedFor(t *testing.T) {
	for msg, want := range map[string]string{
		"The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi. Container runner was using 900Mi, request is 0, has larger consumption of memory. ": "memory",
		"The node was low on resource: pids. ":                               "pids",
		"The node was low on resource: ephemeral-storage. ":                  "ephemeral-storage",
		`Container build exceeded its local ephemeral storage limit "1Gi". `: "ephemeral-storage limit",
		"something else": "",
	} {
		assert.Equal(t, want, EvictedFor(msg), msg)
	}
}

func TestWithNode(t *testing.T) {
	deleted := func(c Class) Record {
		return Record{DeathRecord: v1alpha1.DeathRecord{Class: string(c), Deleted: true}}
	}
	cases := []struct {
		name  string
		r     Record
		node  *corev1.Node
		want  Class
		basis string
	}{
		{name: "a runner deleted while Karpenter drains its node is node-disrupted", r: deleted(SigTerm),
			node: node(corev1.Taint{Key: TaintKarpenterDisrupted, Effect: corev1.TaintEffectNoSchedule}), want: NodeDisrupted,
			basis: "the pod was deleted while Karpenter was removing the node (taint karpenter.sh/disrupted)"},
		{name: "a runner deleted while the cluster autoscaler removes its node is node-disrupted", r: deleted(SigKill),
			node: node(corev1.Taint{Key: TaintAutoscalerDelete, Effect: corev1.TaintEffectNoSchedule}), want: NodeDisrupted,
			basis: "the pod was deleted while the cluster autoscaler was removing the node (taint ToBeDeletedByClusterAutoscaler)"},
		{name: "a runner evicted from a cordoned node is node-disrupted (a drain)", r: func() Record {
			r := deleted(SigTerm)
			r.Disruption = &v1alpha1.Disruption{Reason: "EvictionByEvictionAPI"}
			return r
		}(), node: func() *corev1.Node { n := node(); n.Spec.Unschedulable = true; return n }(), want: NodeDisrupted,
			basis: "the pod was deleted while the node was cordoned (a drain)"},
		{name: "a runner removed at once from a deleted Node is node-disrupted", r: deleted(DeletedRunning),
			node: func() *corev1.Node { n := node(); n.DeletionTimestamp = &metav1.Time{Time: podtest.Start}; return n }(), want: NodeDisrupted,
			basis: "the pod was deleted while the Node object was being deleted"},
		{name: "a runner removed at once from a node that is gone stays deleted-running (pod GC says when it removed it)", r: deleted(DeletedRunning), want: DeletedRunning},
		{name: "a runner removed at once from an unreachable node is node-lost", r: deleted(DeletedRunning),
			node: node(corev1.Taint{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute}), want: NodeLost,
			basis: "the pod was removed with no end reported while the node was unreachable"},
		{name: "a SIGTERM with no deletion is not the node's, whatever its taints", r: Record{DeathRecord: v1alpha1.DeathRecord{Class: string(SigTerm)}},
			node: node(corev1.Taint{Key: TaintKarpenterDisrupted}), want: SigTerm},
		{name: "a deleted runner on a healthy node stays a SIGTERM", r: deleted(SigTerm), node: node(), want: SigTerm},
		{name: "an OOM kill on a draining node stays an OOM kill", r: deleted(CgroupOOM),
			node: node(corev1.Taint{Key: TaintKarpenterDisrupted}), want: CgroupOOM},
		{name: "a job's normal end on a draining node stays the job's end", r: deleted(JobEnded),
			node: node(corev1.Taint{Key: TaintKarpenterDisrupted}), want: JobEnded},
		{name: "a SIGKILL the vitals confirm as an OOM stays a SIGKILL on a draining node", r: func() Record {
			r := deleted(SigKill)
			r.OOMConfirmed = ptr.To(true)
			return r
		}(), node: node(corev1.Taint{Key: TaintAutoscalerDelete}), want: SigKill},
		{name: "a deleted runner on a node with a drain in progress (node-lifecycle condition) is node-disrupted", r: deleted(SigTerm),
			node: withCondition(node(corev1.Taint{Key: corev1.TaintNodeUnschedulable}), ConditionDrainInProgress), want: NodeDisrupted,
			basis: "the pod was deleted while the node was being drained (condition DrainInProgress)"},
		{name: "a deleted runner on a node whose maintenance is planned is node-disrupted", r: deleted(SigTerm),
			node: withCondition(node(), ConditionMaintenancePlanned), want: NodeDisrupted,
			basis: "the pod was deleted while maintenance was planned for the node (condition MaintenancePlanned)"},
		{name: "a deleted runner on a NotReady node that still exists is not made node-lost", r: deleted(SigTerm),
			node: func() *corev1.Node {
				n := node()
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}
				return n
			}(), want: SigTerm},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			WithNode(&r, NodeStateOf(tc.node))
			assert.Equal(t, string(tc.want), r.Class)
			assert.Equal(t, tc.basis, r.ClassBasis)
			assert.Equal(t, NodeStateOf(tc.node), r.NodeState)
		})
	}
}

// withCondition is n with condition typ True.
func withCondition(n *corev1.Node, typ string) *corev1.Node {
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(typ), Status: corev1.ConditionTrue})
	return n
}

func node(taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}, {Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}}}}
}

func TestNodeStateOf(t *testing.T) {
	n := node(corev1.Taint{Key: TaintKarpenterDisrupted}, corev1.Taint{Key: "team", Value: "ci"}, corev1.Taint{Key: corev1.TaintNodeUnschedulable})
	n.Spec.Unschedulable = true
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}, {Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse}}
	assert.Equal(t, &v1alpha1.NodeState{Conditions: []string{"Ready=False", "MemoryPressure=True"},
		Taints: []string{TaintKarpenterDisrupted, corev1.TaintNodeUnschedulable}}, NodeStateOf(n), "only what a healthy node has not, and only disruption taints, once")
	assert.Equal(t, &v1alpha1.NodeState{Gone: true}, NodeStateOf(nil))
}
