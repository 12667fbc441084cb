//go:build tools

// Package karpenter only pins the binary the harness builds, so that go mod
// tidy keeps its dependencies in go.sum.
package karpenter

import (
	_ "sigs.k8s.io/karpenter/kwok"
)
