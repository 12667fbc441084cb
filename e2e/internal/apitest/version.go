package apitest

import (
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
)

// Feature is what a test needs of the API server beyond the oldest minor the
// chart supports, and the first minor that has it by default.
type Feature struct {
	Name  string
	Since *utilversion.Version
}

// The features some tests need (make compat runs the suite on older minors).
var (
	// PodLevelResources: the server keeps a pod's spec.resources and
	// computes its QoS class from them (gate beta and on by default in 1.34).
	PodLevelResources = Feature{"pod-level resources (PodLevelResources, on by default from 1.34)", utilversion.MajorMinor(1, 34)}
	// PodResize: the pods/resize subresource (InPlacePodVerticalScaling, beta
	// in 1.33, where resizes moved to the subresource).
	PodResize = Feature{"the pods/resize subresource (InPlacePodVerticalScaling, from 1.33)", utilversion.MajorMinor(1, 33)}
	// PodLevelResize: pods/resize changes the pod-level spec.resources
	// (InPlacePodLevelResourcesVerticalScaling, beta and on in 1.37).
	PodLevelResize = Feature{"in-place resize of pod-level resources (InPlacePodLevelResourcesVerticalScaling, on in 1.37)", utilversion.MajorMinor(1, 37)}
)

// RequireServer skips t, naming f, when the API server d talks to is older
// than f.Since: the test needs a feature that server does not have, which
// is no failure of runnerguard's. A version it cannot read fails t.
func RequireServer(t testing.TB, d discovery.ServerVersionInterface, f Feature) {
	t.Helper()
	if has, version := ServerHas(t, d, f); !has {
		t.Skipf("needs %s; the API server is %s", f.Name, version)
	}
}

// ServerHas says whether the API server d talks to has f by default, and
// its version, for a test whose expectation differs by server rather than
// one that cannot run without f.
func ServerHas(t testing.TB, d discovery.ServerVersionInterface, f Feature) (bool, string) {
	t.Helper()
	info, err := d.ServerVersion()
	if err != nil {
		t.Fatalf("reading the API server's version: %v", err)
	}
	v, err := utilversion.ParseGeneric(info.GitVersion)
	if err != nil {
		t.Fatalf("reading the API server's version %q: %v", info.GitVersion, err)
	}
	return v.AtLeast(f.Since), info.GitVersion
}
