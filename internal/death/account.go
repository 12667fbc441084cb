package death

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/vitals/record"
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

// The node-lifecycle conditions a node carries as notice of its being
// taken away (NodeLifecycleConditions, alpha in Kubernetes 1.38): True is
// not a healthy node's state, so NodeStateOf keeps them as it keeps a
// pressure.
const (
	ConditionDrainInProgress    = "DrainInProgress"
	ConditionMaintenancePlanned = "MaintenancePlanned"
)

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

// FinalVitals reads the final reading the vitals sidecar left in its
// termination message, current or last.
func FinalVitals(pod *corev1.Pod) (record.Final, bool) {
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name != runnerpod.VitalsContainer {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t == nil {
				continue
			}
			if f, err := record.ParseFinal(t.Message); err == nil {
				return f, true
			}
		}
	}
	return record.Final{}, false
}

// vitals is the API's form of the sidecar's final reading: the runner
// container's own cgroup (by its container id) when the sidecar saw it,
// with the pod's beside it where they differ; else the pod's.
func vitals(f record.Final, containerID string) *v1alpha1.Vitals {
	pod := memory(record.FinalMemory{Peak: f.Peak, PeakObserved: f.PeakObserved, Limit: f.Limit, OOM: f.OOM, OOMKill: f.OOMKill, OOMKillAt: f.OOMKillAt})
	_, id, _ := strings.Cut(containerID, "://")
	c, ok := f.Containers[id]
	if id == "" || !ok {
		return &v1alpha1.Vitals{Cgroup: f.Cgroup, Scope: ScopePod, Memory: pod, OOMWatch: f.OOMWatch}
	}
	v := &v1alpha1.Vitals{Cgroup: f.Cgroup, Scope: ScopeContainer, Memory: memory(c), OOMWatch: f.OOMWatch}
	if !equality.Semantic.DeepEqual(v.Memory, pod) {
		v.Pod = &pod
	}
	return v
}

// The scopes of a record's vitals.
const (
	ScopeContainer = "container" // the runner container's own cgroup
	ScopePod       = "pod"       // the pod's cgroup: every container and the sidecar
)

func memory(m record.FinalMemory) v1alpha1.Memory {
	out := v1alpha1.Memory{PeakObserved: m.PeakObserved, OOM: int64(m.OOM), OOMKill: int64(m.OOMKill)}
	if m.Peak != nil {
		out.Peak = ptr.To(int64(*m.Peak))
	}
	if m.Limit != nil {
		out.Limit = ptr.To(int64(*m.Limit))
	}
	if m.OOMKillAt != nil {
		out.OOMKillAt = timePtr(*m.OOMKillAt)
	}
	return out
}

func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	return &metav1.Time{Time: t}
}

// Refusals are what the guard refused to let be done to the runner, as its
// pod carries them (refusal.Annotation, which only runnerguard writes). A
// value that does not parse (never the guard's) is told as lost, not
// dropped silently.
func Refusals(pod *corev1.Pod) *v1alpha1.Refusals {
	l, err := refusal.FromPod(pod.Annotations)
	if err != nil {
		return &v1alpha1.Refusals{Dropped: 1}
	}
	return l
}

// warned is l with the deletion n added as what enforce would have
// refused: a deletion admitted as busy, which only warn mode admits. It is
// kept on the record as a refusal is, from the note, whether or not the
// pod's own list took it before the pod went (counted once if it did).
func warned(l *v1alpha1.Refusals, n *v1alpha1.DeletionNote) *v1alpha1.Refusals {
	out := refusal.Add(ptr.Deref(l, v1alpha1.Refusals{}), refusal.One{By: n.Requester, Verb: n.Operation, Rule: n.Rule, At: n.Time.Time, Warned: true})
	return &out
}

// vitalsLeft is how long r still waits for the vitals' final reading: while
// the sidecar runs after the runner ended, up to VitalsWait past the end or,
// once the pod's deletion is under way, past that deletion's deadline. The
// kubelet stops the sidecar only after every other container of the pod
// ended: a runner killed on its own (an OOM kill) leaves it running beside
// the pod's other containers (GitLab's helper) until its owner's delete
// ends them, a grace period after that delete.
func vitalsLeft(o Observation, r Record) time.Duration {
	if r.Vitals != nil || r.FinishedAt == nil || !o.GoneAt.IsZero() {
		return 0
	}
	for _, cs := range o.Pod.Status.InitContainerStatuses {
		if cs.Name == runnerpod.VitalsContainer && cs.State.Running != nil {
			until := r.FinishedAt.Time
			if dl := o.Pod.DeletionTimestamp; dl != nil && dl.After(until) {
				until = dl.Time
			}
			return until.Add(VitalsWait).Sub(o.Now)
		}
	}
	return 0
}
