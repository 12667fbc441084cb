// Package load measures what runnerguard costs through the project's own
// kube-apiserver (pod CREATE and DELETE latency with and without the
// webhooks, against a mutating webhook that does nothing and a
// ValidatingAdmissionPolicy with the same rule; pod
// CREATE and UPDATE with and without the chart's policy on who may write
// the guard's signals) and what its webhook server sustains alone over
// TLS. Run with `make bench` (build tag load); it prints one table with
// the handler benchmarks and the vitals sidecar's figures beside its own.
package load
