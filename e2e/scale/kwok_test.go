//go:build scale

package scale

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// nodeLabel marks the Nodes kwok plays; no other Node exists here, but the
// selector keeps kwok off any a later setup might add.
const nodeLabel = "sim.runnerguard.io/node"

// process is a control-plane program the simulation runs beside the API
// server, as the admin of the cluster.
type process struct{ cmd *exec.Cmd }

// startProcess runs bin with a kubeconfig of c's admin (written to
// dir/name.kubeconfig, passed as --kubeconfig) and args, logging to logPath,
// with env added to this process's environment.
func startProcess(c *apitest.Cluster, dir, name, bin, logPath string, env []string, args ...string) (*process, error) {
	kc := filepath.Join(dir, name+".kubeconfig")
	if err := os.WriteFile(kc, c.Env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	logs, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig=" + kc}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), env...)
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

// startKwok runs the kwok binary (KWOK, built by hack/tools.sh) as the
// admin of c with the Stages of testdata/stages.yaml, playing the kubelet
// of every Node labelled nodeLabel.
func startKwok(c *apitest.Cluster, dir, logPath string) (*process, error) {
	bin := os.Getenv("KWOK")
	if bin == "" {
		return nil, fmt.Errorf("KWOK is not set: run through make scale, which builds kwok")
	}
	stages, err := filepath.Abs("testdata/stages.yaml")
	if err != nil {
		return nil, err
	}
	// No node leases (nothing here reads them) and no kwok server: its
	// kubelet API would listen on all interfaces, and nothing needs logs or
	// exec of a simulated pod. HOME is dir so kwok's default config
	// (~/.kwok/kwok.yaml) of whoever runs this cannot add stages.
	return startProcess(c, dir, "kwok", bin, logPath, []string{"HOME=" + dir}, "--config="+stages,
		"--manage-nodes-with-label-selector="+nodeLabel+"=kwok",
		"--node-lease-duration-seconds=0", "--node-port=0", "--server-address=")
}
