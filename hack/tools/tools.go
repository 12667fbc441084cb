//go:build tools

// Package tools only pins the binaries the harness builds, so that go mod
// tidy keeps their dependencies in go.sum.
package tools

import (
	_ "github.com/google/go-containerregistry/cmd/crane"
	_ "github.com/norwoodj/helm-docs/cmd/helm-docs"
	_ "github.com/prometheus/prometheus/cmd/promtool"
	_ "go.etcd.io/etcd/server/v3"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "helm.sh/helm/v4/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/karpenter/kwok"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
