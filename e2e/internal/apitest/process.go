package apitest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Process is a program a suite runs beside the API server as the cluster's
// admin: kube-controller-manager, kube-scheduler, kwok, Karpenter. It is
// waited for from its start, so that a suite learns at once that it ended
// (a port taken, a flag refused) instead of waiting out a bound for what it
// would have done.
type Process struct {
	name, log string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error
}

// AdminKubeconfig writes the cluster admin's kubeconfig to
// dir/name.kubeconfig and returns its path.
func (c *Cluster) AdminKubeconfig(dir, name string) (string, error) {
	kc := filepath.Join(dir, name+".kubeconfig")
	return kc, os.WriteFile(kc, c.Env.KubeConfig, 0o600)
}

// StartProcess runs bin with args, env added to this process's environment,
// its output to logPath.
func StartProcess(name, bin, logPath string, env []string, args ...string) (*Process, error) {
	logs, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		_ = logs.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logs.Close()
		close(p.done)
	}()
	return p, nil
}

// Ended is nil while the program runs, and otherwise says how it ended,
// with the end of its log.
func (p *Process) Ended() error {
	select {
	case <-p.done:
		return fmt.Errorf("%s ended (%v); the end of its log:\n%s", p.name, p.err, LogTail(p.log, 30))
	default:
		return nil
	}
}

// LogTail is the last n lines of the file at path, or why it could not be
// read.
func LogTail(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Pid is the program's process ID, for a report of its resources.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop ends the program (SIGTERM) and waits for it.
func (p *Process) Stop(context.Context) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}

// StartKwok runs kwok (the binary KWOK names, built by hack/tools.sh) as
// the cluster's admin with the Stages of e2e/scale/testdata/stages.yaml,
// playing the kubelet of the Nodes selector selects.
func StartKwok(c *Cluster, dir, logPath, selector string) (*Process, error) {
	bin := os.Getenv("KWOK")
	if bin == "" {
		return nil, fmt.Errorf("KWOK is not set: run through make, which builds kwok")
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	kc, err := c.AdminKubeconfig(dir, "kwok")
	if err != nil {
		return nil, err
	}
	// No node leases (nothing here reads them) and no kwok server: its
	// kubelet API would listen on all interfaces, and nothing needs logs or
	// exec of a simulated pod. HOME is dir so kwok's default config
	// (~/.kwok/kwok.yaml) of whoever runs this cannot add stages.
	return StartProcess("kwok", bin, logPath, []string{"HOME=" + dir},
		"--kubeconfig="+kc, "--config="+filepath.Join(root, "e2e", "scale", "testdata", "stages.yaml"),
		"--manage-nodes-with-label-selector="+selector,
		"--node-lease-duration-seconds=0", "--node-port=0", "--server-address=")
}

// EnvInt is the positive integer in the environment variable name, or def.
func EnvInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// EnvDuration is the positive duration in the environment variable name,
// or def.
func EnvDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

// Until polls cond every half second for at most d, and fails t if it never
// held: the bounds are generous, the waits end as soon as cond holds.
func Until(ctx context.Context, t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, d, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting %s for %s: %v", d, what, err)
	}
}
