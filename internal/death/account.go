package death

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// MaxMessageBytes bounds the runner's termination message in a record: the
// kubelet's own cap for one container (4 KiB; 2 KiB when it falls back to
// the logs), so a message the kubelet kept is kept whole. The bound still
// holds when someone who may write pods/status wrote a longer one.
const MaxMessageBytes = 4096

// maxNoteBytes bounds the pod's and the DisruptionTarget's messages, which
// the control plane writes in a sentence or two.
const maxNoteBytes = 1024

// Tail is the last max bytes of s, cut at a character boundary, and whether
// anything was cut. The end of a runner's log is its last words.
func Tail(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	i := len(s) - max
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:], true
}

// head is the first max bytes of s, cut at a character boundary.
func head(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

// disruption is the pod's true DisruptionTarget condition, if any.
func disruption(pod *corev1.Pod) *v1alpha1.Disruption {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return &v1alpha1.Disruption{Reason: c.Reason, Message: head(c.Message, maxNoteBytes)}
		}
	}
	return nil
}

// The kubelet's eviction messages when a pod outgrows its own ephemeral
// storage (pkg/kubelet/eviction/helpers.go: containerEphemeralStorageMessageFmt,
// podEphemeralStorageMessageFmt, emptyDirMessageFmt), as opposed to
// nodeLowMessageFmt, "The node was low on resource: %v.", of node pressure.
var ownStorageLimit = []string{
	"exceeded its local ephemeral storage limit",
	"ephemeral local storage usage exceeds the total limit",
	"Usage of EmptyDir volume",
}

// nodeLow is the start of the kubelet's message of an eviction under node
// pressure; the resource follows.
const nodeLow = "The node was low on resource: "

// EvictedFor names what the kubelet evicted a pod for, from its eviction
// message: "ephemeral-storage limit" (the pod's own limit), or the
// resource the node ran low on (memory, ephemeral-storage, pids, ...), or
// "" when the message says neither.
func EvictedFor(msg string) string {
	for _, s := range ownStorageLimit {
		if strings.Contains(msg, s) {
			return "ephemeral-storage limit"
		}
	}
	if _, rest, ok := strings.Cut(msg, nodeLow); ok {
		res, _, _ := strings.Cut(rest, ".")
		return strings.TrimSpace(res)
	}
	return ""
}

// The disruption taints a node carries while it is being taken away.
const (
	// TaintKarpenterDisrupted: Karpenter is draining the node to remove it.
	TaintKarpenterDisrupted = "karpenter.sh/disrupted"
	// TaintAutoscalerDelete: the cluster autoscaler is removing the node.
	TaintAutoscalerDelete = "ToBeDeletedByClusterAutoscaler"
)

// disruptionTaints are the taints NodeStateOf keeps: those of a node being
// taken away or lost.
var disruptionTaints = []string{
	TaintKarpenterDisrupted, TaintAutoscalerDelete,
	corev1.TaintNodeUnschedulable, corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable,
	corev1.TaintNodeOutOfService,
}

// NodeStateOf is what a record keeps of node (nil: no Node of that name).
func NodeStateOf(node *corev1.Node) *v1alpha1.NodeState {
	if node == nil {
		return &v1alpha1.NodeState{Gone: true}
	}
	s := &v1alpha1.NodeState{Deleting: node.DeletionTimestamp != nil}
	for _, c := range node.Status.Conditions {
		healthy := c.Status == corev1.ConditionFalse
		if c.Type == corev1.NodeReady {
			healthy = c.Status == corev1.ConditionTrue
		}
		if !healthy {
			s.Conditions = append(s.Conditions, fmt.Sprintf("%s=%s", c.Type, c.Status))
		}
	}
	for _, t := range node.Spec.Taints {
		if slices.Contains(disruptionTaints, t.Key) && !slices.Contains(s.Taints, t.Key) {
			s.Taints = append(s.Taints, t.Key)
		}
	}
	if node.Spec.Unschedulable && !slices.Contains(s.Taints, corev1.TaintNodeUnschedulable) {
		s.Taints = append(s.Taints, corev1.TaintNodeUnschedulable)
	}
	return s
}

// takenAway says how the node was being taken away, or "".
func takenAway(s *v1alpha1.NodeState) string {
	switch {
	case s == nil:
		return ""
	case slices.Contains(s.Taints, TaintKarpenterDisrupted):
		return "Karpenter was removing the node (taint " + TaintKarpenterDisrupted + ")"
	case slices.Contains(s.Taints, TaintAutoscalerDelete):
		return "the cluster autoscaler was removing the node (taint " + TaintAutoscalerDelete + ")"
	case s.Deleting:
		return "the Node object was being deleted"
	case slices.Contains(s.Taints, corev1.TaintNodeOutOfService):
		return "the node was marked out of service"
	case slices.Contains(s.Taints, corev1.TaintNodeUnschedulable):
		return "the node was cordoned (a drain)"
	}
	return ""
}

// lostNode says how the node was lost, or "". A Node object that is gone
// proves nothing here: pod GC marks the pods of a deleted Node itself
// (DeletionByPodGC), and a pod bound to a name no Node ever had was never
// run by a kubelet.
func lostNode(s *v1alpha1.NodeState) string {
	switch {
	case s == nil:
		return ""
	case slices.Contains(s.Taints, corev1.TaintNodeUnreachable):
		return "the node was unreachable"
	case slices.Contains(s.Conditions, "Ready=False"), slices.Contains(s.Conditions, "Ready=Unknown"):
		return "the node was not ready"
	}
	return ""
}

// WithNode adds the node's state at the death to r and lets it change the
// class where it explains the death: a runner signalled or removed because
// its pod was deleted while its node was being taken away (a drain,
// Karpenter, the cluster autoscaler) is node-disrupted, and one removed
// with no end reported from a lost node is node-lost. Classes read from
// stronger evidence (an OOM kill, an eviction, the job's owner) stay.
func WithNode(r *Record, s *v1alpha1.NodeState) {
	r.NodeState = s
	c := Class(r.Class)
	killed := c == SigTerm || c == SigKill || c == ExternalKill || c == DeletedRunning
	oom := r.OOMConfirmed != nil && *r.OOMConfirmed
	if !killed || oom || !(r.Deleted || r.Disruption != nil) {
		return
	}
	if why := takenAway(s); why != "" {
		r.Class, r.ClassBasis = string(NodeDisrupted), "the pod was deleted while "+why
		r.OOMConfirmed = oomConfirmed(NodeDisrupted, r.Vitals)
		return
	}
	if why := lostNode(s); why != "" && c == DeletedRunning {
		r.Class, r.ClassBasis = string(NodeLost), "the pod was removed with no end reported while "+why
	}
}
