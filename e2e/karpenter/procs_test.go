//go:build karpenter

package karpenter

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// process is a program the scenario runs beside the API server, as the
// admin of the cluster.
type process struct{ cmd *exec.Cmd }

// startProcess runs bin with env added to this process's environment and
// KUBECONFIG set to c's admin (written to dir/name.kubeconfig), logging to
// logPath.
func startProcess(c *apitest.Cluster, dir, name, bin, logPath string, env []string, args ...string) (*process, error) {
	kc := filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(kc, c.Env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	logs, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(append(os.Environ(), "KUBECONFIG="+kc), env...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return &process{cmd: cmd}, nil
}

// Stop ends the program (SIGTERM) and waits for it.
func (p *process) Stop(context.Context) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

// startKwok runs kwok (KWOK, built by hack/tools.sh) with the scale
// harness's Stages, playing the kubelet of the Nodes Karpenter's kwok
// provider creates (it labels them kwok.x-k8s.io/node=fake).
func startKwok(c *apitest.Cluster, dir, logPath string) (*process, error) {
	bin := os.Getenv("KWOK")
	if bin == "" {
		return nil, fmt.Errorf("KWOK is not set: run through make karpenter, which builds kwok")
	}
	stages, err := filepath.Abs("../scale/testdata/stages.yaml")
	if err != nil {
		return nil, err
	}
	// As in e2e/scale: no node leases, no kwok server, HOME of our own.
	kc := filepath.Join(dir, "kwok.kubeconfig")
	return startProcess(c, dir, "kwok", bin, logPath, []string{"HOME=" + dir}, "--kubeconfig="+kc, "--config="+stages,
		"--manage-nodes-with-label-selector=kwok.x-k8s.io/node=fake",
		"--node-lease-duration-seconds=0", "--node-port=0", "--server-address=")
}

// startScheduler runs the real kube-scheduler from KUBEBUILDER_ASSETS: it
// marks a pod that fits no Node unschedulable, which is what Karpenter
// provisions for, and binds pods to the Nodes Karpenter made.
func startScheduler(c *apitest.Cluster, dir, logPath string) (*process, error) {
	kc := filepath.Join(dir, "kube-scheduler.kubeconfig")
	return startProcess(c, dir, "kube-scheduler", filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-scheduler"), logPath, nil,
		"--kubeconfig="+kc, "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0")
}

// startKarpenter runs Karpenter's kwok provider (the binary in
// KARPENTER_DIR, built by hack/karpenter.sh) as the admin of c, alone
// (no leader election), on ports of its own.
func startKarpenter(c *apitest.Cluster, dir, logPath string) (*process, error) {
	home := os.Getenv("KARPENTER_DIR")
	if home == "" {
		return nil, fmt.Errorf("KARPENTER_DIR is not set: run through make karpenter, which builds Karpenter")
	}
	metrics, err := freePort()
	if err != nil {
		return nil, err
	}
	probe, err := freePort()
	if err != nil {
		return nil, err
	}
	return startProcess(c, dir, "karpenter", filepath.Join(home, "karpenter-kwok"), logPath, []string{
		"DISABLE_LEADER_ELECTION=true", "LOG_LEVEL=debug",
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

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
