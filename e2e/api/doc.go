// Package api tests runnerguard's webhooks through a real kube-apiserver and
// etcd (built from source by hack/kube.sh) with the real runnerguard binary
// serving them: what oldObject, subResource, dryRun and userInfo hold comes
// from the API server itself. Run with `make e2e-api` (build tag e2e).
package api
