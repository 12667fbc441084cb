package drain

import (
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node-lifecycle conditions a drain reports (Kubernetes 1.38's
// NodeLifecycleConditions, which the node-lifecycle proposal has kubectl
// drain --report-node-conditions write).
const (
	ConditionDrainInProgress corev1.NodeConditionType = "DrainInProgress"
	ConditionDrained         corev1.NodeConditionType = "Drained"
)

// ConditionReason is the reason the drain's conditions carry.
const ConditionReason = "RunnerguardDrain"

// Conditions are the node conditions a drain reports at a point of its
// run: while it runs, DrainInProgress True and Drained False; once drained,
// DrainInProgress False and Drained True. A drain that gives up (its
// timeout) leaves them as they were while it ran: the node stays cordoned
// with runners on it.
func Conditions(drained bool, now time.Time, message string) []corev1.NodeCondition {
	in, done := corev1.ConditionTrue, corev1.ConditionFalse
	if drained {
		in, done = corev1.ConditionFalse, corev1.ConditionTrue
	}
	t := metav1.NewTime(now)
	return []corev1.NodeCondition{
		{Type: ConditionDrainInProgress, Status: in, Reason: ConditionReason, Message: message, LastHeartbeatTime: t, LastTransitionTime: t},
		{Type: ConditionDrained, Status: done, Reason: ConditionReason, Message: message, LastHeartbeatTime: t, LastTransitionTime: t},
	}
}

// ConditionNeeds is what reporting the conditions asks for: patch on each
// node's status.
func ConditionNeeds(nodes []string) []Permission {
	var ps []Permission
	for _, n := range nodes {
		ps = append(ps, Permission{ResourceAttributes: authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Subresource: "status", Name: n},
			For: "to report the drain in the node's conditions (--report-node-conditions)"})
	}
	return ps
}
