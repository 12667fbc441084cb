package runnerpod

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// NodeDrain is a node's drain deadline as its annotations state it.
type NodeDrain struct {
	// At is when busy runners on the node may go.
	At time.Time
	// By is who set it (DrainDeadlineBy, which the chart's policy holds
	// equal to the setter), "" when unnamed.
	By string
}

// NodeDrainDeadline is node's drain deadline: false when the node carries none
// or its value is not an RFC3339 time (a typo frees nothing).
func NodeDrainDeadline(node *corev1.Node) (NodeDrain, bool) {
	if node == nil {
		return NodeDrain{}, false
	}
	v := strings.TrimSpace(node.Annotations[DrainDeadline])
	if v == "" {
		return NodeDrain{}, false
	}
	at, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return NodeDrain{}, false
	}
	return NodeDrain{At: at, By: strings.TrimSpace(node.Annotations[DrainDeadlineBy])}, true
}

// NodeDrainFor is node's drain deadline as it applies to pod: only to a
// pod that started before it, so a deadline left on a node that stays in
// service (or set before the node was cordoned) never frees the jobs that
// land there later. A deadline that names no setter frees nothing, since
// the record could not say who ended the job (the policy refuses such a
// write; an older Node may still carry one).
func NodeDrainFor(node *corev1.Node, pod *corev1.Pod) (NodeDrain, bool) {
	d, ok := NodeDrainDeadline(node)
	if !ok || d.By == "" || pod == nil {
		return d, false
	}
	// A pod without a start has no running runner, so nothing to free.
	if s := pod.Status.StartTime; s != nil && !s.Time.Before(d.At) {
		return d, false
	}
	return d, true
}

// NodeDrainPassed reports whether the drain deadline of pod's node has
// come at now for pod (NodeDrainFor), and the deadline: the guard then lets
// the busy runner go, and the leader's marker releases what holds it there.
func NodeDrainPassed(node *corev1.Node, pod *corev1.Pod, now time.Time) (NodeDrain, bool) {
	d, ok := NodeDrainFor(node, pod)
	return d, ok && !now.Before(d.At)
}
