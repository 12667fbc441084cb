// Package load measures what runnerguard costs through the project's own
// kube-apiserver (pod CREATE and DELETE latency with and without the
// webhooks, against a mutating webhook that does nothing and a
// ValidatingAdmissionPolicy with the same rule; a refused DELETE against
// that policy and an allowed eviction against a validating webhook that
// does nothing; pod CREATE and UPDATE with and without the chart's policy
// on who may write the guard's signals; the injector's latency while a
// flood of the largest reviews hits the guard's path) and what its webhook
// server sustains alone over TLS. Run with `make bench` (build tag load);
// it prints one table with the handler benchmarks and the vitals sidecar's
// figures beside its own.
package load
