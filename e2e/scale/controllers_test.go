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

// kcmProc is the real kube-controller-manager, running only the
// controllers that kill runner pods in a fleet: the namespace controller
// (namespace deletion), pod GC (the pods of a lost node) and the garbage
// collector (the pods of a deleted EphemeralRunner). No serviceaccount
// controller: its default ServiceAccounts would change every pod's shape.
type kcmProc struct{ cmd *exec.Cmd }

// startKCM runs kube-controller-manager from KUBEBUILDER_ASSETS as the admin
// of c. With --use-service-account-credentials each controller asks the API
// server for its own ServiceAccount's token (TokenRequest, signed with
// envtest's service-account key), so the guard sees the namespace controller
// and pod GC under their real usernames, the ones config.Default exempts.
func startKCM(c *apitest.Cluster, dir, logPath string) (*kcmProc, error) {
	kc := filepath.Join(dir, "kcm.kubeconfig")
	if err := os.WriteFile(kc, c.Env.KubeConfig, 0o600); err != nil {
		return nil, err
	}
	logs, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager"),
		"--kubeconfig="+kc, "--use-service-account-credentials=true",
		"--controllers=namespace,podgc,garbagecollector",
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	return &kcmProc{cmd: cmd}, nil
}

// Stop ends kube-controller-manager.
func (k *kcmProc) Stop(context.Context) {
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	_ = k.cmd.Wait()
}
