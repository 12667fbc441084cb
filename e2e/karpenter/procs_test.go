//go:build karpenter

package karpenter

import (
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// startKwok runs kwok, playing the kubelet of the Nodes Karpenter's kwok
// provider creates (it labels them kwok.x-k8s.io/node=fake).
func startKwok(c *apitest.Cluster, dir, logPath string) (*apitest.Process, error) {
	return apitest.StartKwok(c, dir, logPath, "kwok.x-k8s.io/node=fake")
}

// startScheduler runs the real kube-scheduler from KUBEBUILDER_ASSETS: it
// marks a pod that fits no Node unschedulable, which is what Karpenter
// provisions for, and binds pods to the Nodes Karpenter made.
func startScheduler(c *apitest.Cluster, dir, logPath string) (*apitest.Process, error) {
	kc, err := c.AdminKubeconfig(dir, "kube-scheduler")
	if err != nil {
		return nil, err
	}
	return apitest.StartProcess("kube-scheduler", filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-scheduler"), logPath, nil,
		"--kubeconfig="+kc, "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0")
}

// startKarpenter runs Karpenter's kwok provider (the binary in
// KARPENTER_DIR, built by hack/karpenter.sh) as the admin of c, alone
// (no leader election), on ports of its own.
func startKarpenter(c *apitest.Cluster, dir, logPath string) (*apitest.Process, error) {
	home := os.Getenv("KARPENTER_DIR")
	if home == "" {
		return nil, fmt.Errorf("KARPENTER_DIR is not set: run through make karpenter, which builds Karpenter")
	}
	kc, err := c.AdminKubeconfig(dir, "karpenter")
	if err != nil {
		return nil, err
	}
	metrics, err := apitest.FreePort()
	if err != nil {
		return nil, err
	}
	probe, err := apitest.FreePort()
	if err != nil {
		return nil, err
	}
	return apitest.StartProcess("karpenter", filepath.Join(home, "karpenter-kwok"), logPath, []string{
		"KUBECONFIG=" + kc, "DISABLE_LEADER_ELECTION=true", "LOG_LEVEL=debug",
		// One provisioning batch for the burst of runner pods, so each
		// setup gets the fewest nodes that hold its runners.
		"BATCH_IDLE_DURATION=3s", "BATCH_MAX_DURATION=30s",
		fmt.Sprintf("METRICS_PORT=%d", metrics), fmt.Sprintf("HEALTH_PROBE_PORT=%d", probe),
	})
}

// karpenterCRDs reads the CRDs hack/karpenter.sh copied beside the binary,
// from the module it was built from.
func karpenterCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := filepath.Glob(filepath.Join(os.Getenv("KARPENTER_DIR"), "crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in $KARPENTER_DIR/crds: run through make karpenter")
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}
