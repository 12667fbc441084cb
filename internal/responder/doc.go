// Package responder is runnerguard as an eviction responder
// (lifecycle.k8s.io/v1alpha1, Kubernetes 1.38 with the EvictionRequestAPI
// gate): the entry the injector adds to a runner pod's
// spec.evictionResponders, the few fields of an Eviction the leader reads,
// and its answer to each one. Pure: the leader's glue
// (internal/recorder's Responder) reads the cluster and carries it out.
package responder
