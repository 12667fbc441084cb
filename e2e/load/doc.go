// Package load measures what runnerguard costs through the project's own
// kube-apiserver (pod CREATE and DELETE latency with and without the
// webhooks, against a ValidatingAdmissionPolicy with the same rule) and
// what its webhook server sustains alone over TLS. Run with `make bench`
// (build tag load); it prints one table with the handler benchmarks and
// the vitals sidecar's figures beside its own.
package load
