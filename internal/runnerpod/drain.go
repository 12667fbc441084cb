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

// NodeDrainPassed reports whether node's drain deadline has come at
// now, and the deadline: the guard then lets a busy runner on the node go,
// and the leader's marker releases what holds it there. A deadline that
// names no setter frees nothing, since the record could not say who ended
// the job (the policy refuses such a write; an older Node may still carry
// one).
func NodeDrainPassed(node *corev1.Node, now time.Time) (NodeDrain, bool) {
	d, ok := NodeDrainDeadline(node)
	return d, ok && d.By != "" && !now.Before(d.At)
}
