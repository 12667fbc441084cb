package drain

import (
	"fmt"
	"slices"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
	authorizationv1 "k8s.io/api/authorization/v1"
)

// Permission is one thing the drain will do, asked of the API server
// (SelfSubjectAccessReview) before the drain changes anything.
type Permission struct {
	authorizationv1.ResourceAttributes
	// For says what the drain needs it for.
	For string
}

// String names the permission as RBAC does, where, and what for.
func (p Permission) String() string {
	res := p.Resource
	if p.Subresource != "" {
		res += "/" + p.Subresource
	}
	if p.Group != "" {
		res += "." + p.Group
	}
	where := "cluster-wide"
	if p.Namespace != "" {
		where = "in namespace " + p.Namespace
	}
	if p.Name != "" {
		where = fmt.Sprintf("%s %q", where, p.Name)
		if p.Namespace == "" {
			where = fmt.Sprintf("on %q", p.Name)
		}
	}
	return fmt.Sprintf("%s %s %s (%s)", p.Verb, res, where, p.For)
}

// Needs is what a drain of nodes asks for: patch on each node (the
// cordon), the eviction of pods in each namespace it evicts from and,
// with a deadline, in each namespace of a runner pod it may end, patch on
// pods and the override verb the chart's <release>-override ClusterRole
// grants (the chart's policy checks it before the override annotation is
// written). Namespaces are listed once, sorted.
func Needs(nodes, evictIn, endIn []string) []Permission {
	var ps []Permission
	for _, n := range nodes {
		ps = append(ps, Permission{ResourceAttributes: authorizationv1.ResourceAttributes{Verb: "patch", Resource: "nodes", Name: n}, For: "to cordon the node"})
	}
	for _, ns := range sorted(evictIn) {
		ps = append(ps, Permission{ResourceAttributes: authorizationv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "eviction", Namespace: ns}, For: "to evict its pods"})
	}
	for _, ns := range sorted(endIn) {
		ps = append(ps,
			Permission{ResourceAttributes: authorizationv1.ResourceAttributes{Verb: "patch", Resource: "pods", Namespace: ns}, For: "to set the override on busy runners at the deadline"},
			Permission{ResourceAttributes: authorizationv1.ResourceAttributes{Verb: runnerpod.OverrideVerb, Group: runnerpod.OverrideGroup, Resource: runnerpod.OverrideResource, Namespace: ns},
				For: "the override, which the ClusterRole runnerguard-override grants in a default install: to end busy runners' jobs at the deadline"})
	}
	return ps
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}
