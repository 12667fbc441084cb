// Package apitest runs what the e2e suites drive: the project's own
// kube-apiserver and etcd (built from source by hack/kube.sh, started by
// controller-runtime's envtest) and the real runnerguard binary as a
// process, with its webhooks registered from e2e/internal/registration.
package apitest
