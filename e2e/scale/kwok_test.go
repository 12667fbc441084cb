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

// kwokProc is kwok playing the kubelet of every Node labelled nodeLabel.
type kwokProc struct{ cmd *exec.Cmd }

// startKwok runs the kwok binary (KWOK, built by hack/tools.sh) as the
// admin of c with the Stages of testdata/stages.yaml.
func startKwok(c *apitest.Cluster, dir, logPath string) (*kwokProc, error) {
	bin := os.Getenv("KWOK")
	if bin == "" {
		return nil, fmt.Errorf("KWOK is not set: run through make scale, which builds kwok")
	}
	stages, err := filepath.Abs("testdata/stages.yaml")
	if err != nil {
		return nil, err
	}
	kc := filepath.Join(dir, "kwok.kubeconfig")
	if err := os.WriteFile(kc, c.Env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	logs, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// No node leases (nothing here reads them) and no kwok server: its
	// kubelet API would listen on all interfaces, and nothing needs logs or
	// exec of a simulated pod.
	cmd := exec.Command(bin, "--kubeconfig="+kc, "--config="+stages,
		"--manage-nodes-with-label-selector="+nodeLabel+"=kwok",
		"--node-lease-duration-seconds=0", "--node-port=0", "--server-address=")
	cmd.Stdout, cmd.Stderr = logs, logs
	// HOME is set to dir so kwok's default config (~/.kwok/kwok.yaml) of
	// whoever runs this cannot add stages.
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kwok: %w", err)
	}
	return &kwokProc{cmd: cmd}, nil
}

// Stop ends kwok.
func (k *kwokProc) Stop(context.Context) {
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	_ = k.cmd.Wait()
}
