package drain

import (
	"slices"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
)

// Requester is the drain's name as the requester of its eviction requests
// (lifecycle.k8s.io/v1alpha1, where the API server serves them): on each
// EvictionRequest, and as the label the controller puts on each Eviction
// it asks for.
const Requester = "runnerguard.io/drain"

// maxName is the longest name the API server takes for an
// EvictionRequest.
const maxName = 253

// RequestName is the name of the drain's EvictionRequest for pod: one per
// pod, so a drain run again finds the request it made and asks no twice.
func RequestName(pod string) string {
	n := "runnerguard-drain-" + pod
	if len(n) > maxName {
		n = n[:maxName]
	}
	return n
}

// RequestNeeds is what a drain through eviction requests asks for beyond
// Needs: creating them in each namespace of a runner pod on the nodes,
// reading the Evictions made of them (their responders' progress), and
// changing and deleting its own (withdrawn at the deadline, removed once
// their pods are gone). Namespaces are listed once, sorted.
func RequestNeeds(in []string) []Permission {
	var ps []Permission
	for _, ns := range sorted(in) {
		for _, v := range []struct{ verb, res, why string }{
			{"create", "evictionrequests", "to ask for its runner pods' eviction"},
			{"patch", "evictionrequests", "to withdraw its requests at the deadline"},
			{"delete", "evictionrequests", "to remove its requests once their pods are gone"},
			{"list", "evictions", "to follow the responders' progress"},
		} {
			ps = append(ps, Permission{ResourceAttributes: authorizationv1.ResourceAttributes{Verb: v.verb, Group: "lifecycle.k8s.io", Resource: v.res, Namespace: ns}, For: v.why})
		}
	}
	return ps
}

// Answered splits steps into the runner pods that name responder among
// their eviction responders, which an eviction request suits (their
// responder lets each go when the guard would), and the others (created
// before the injector named it, or opted out), which the drain evicts
// itself: asked for, they would leave only through the default evictor's
// retries, which back off far longer than the drain's look.
func Answered(steps []Step, responder string) (answered, others []Step) {
	for _, s := range steps {
		if slices.ContainsFunc(s.Pod.Spec.EvictionResponders, func(r corev1.EvictionResponder) bool { return r.Name == responder }) {
			answered = append(answered, s)
		} else {
			others = append(others, s)
		}
	}
	return answered, others
}
