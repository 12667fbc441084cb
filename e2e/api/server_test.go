//go:build e2e

package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/registration"
)

// serverUser is the webhook's identity; it holds only the RBAC below, the
// least the webhooks need.
const serverUser = "system:serviceaccount:runnerguard:runnerguard"

// webhookServer is the real runnerguard binary, run as a process.
type webhookServer struct {
	bin, kubeconfig, configPath, certDir string
	port, metricsPort, probePort         int
	caData                               []byte
	logPath                              string

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs *os.File
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

func startServer(ctx context.Context, env *envtest.Environment, workDir, configPath string) (*webhookServer, error) {
	s := &webhookServer{
		bin: filepath.Join(workDir, "runnerguard"), configPath: configPath,
		certDir: env.WebhookInstallOptions.LocalServingCertDir, port: env.WebhookInstallOptions.LocalServingPort,
		caData: env.WebhookInstallOptions.LocalServingCAData,
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", s.bin, "./cmd/runnerguard")
	build.Dir, build.Stdout, build.Stderr = repoRoot(), os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building runnerguard: %w", err)
	}
	if err := grantServerRBAC(ctx); err != nil {
		return nil, err
	}
	user, err := env.AddUser(envtest.User{Name: serverUser}, nil)
	if err != nil {
		return nil, err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	s.kubeconfig = filepath.Join(workDir, "kubeconfig")
	if err := os.WriteFile(s.kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	artifacts := filepath.Join(repoRoot(), "e2e", ".artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		return nil, err
	}
	s.logPath = filepath.Join(artifacts, "runnerguard-api.log")
	if s.logs, err = os.Create(s.logPath); err != nil {
		return nil, err
	}
	for _, p := range []*int{&s.metricsPort, &s.probePort} {
		if *p, err = freePort(); err != nil {
			return nil, err
		}
	}
	return s, s.Start(ctx)
}

// Start runs the binary and waits until it is ready.
func (s *webhookServer) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cmd := exec.Command(s.bin, "serve", "--config="+s.configPath, "--kubeconfig="+s.kubeconfig,
		"--cert-dir="+s.certDir, fmt.Sprintf("--port=%d", s.port),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", s.metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", s.probePort), "--zap-log-level=2")
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting runnerguard: %w", err)
	}
	s.cmd = cmd
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", s.probePort)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		resp, err := http.Get(ready)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// Stop ends the binary (SIGTERM, as the kubelet would).
func (s *webhookServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Options are the registration options pointing the API server at s.
func (s *webhookServer) Options() registration.Options {
	return registration.Options{
		Name: "runnerguard",
		ClientConfig: func(path string) admissionregistrationv1.WebhookClientConfig {
			url := fmt.Sprintf("https://127.0.0.1:%d%s", s.port, path)
			return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: s.caData}
		},
		DeleteFailurePolicy:   admissionregistrationv1.Fail,
		EvictionFailurePolicy: admissionregistrationv1.Fail,
		TimeoutSeconds:        5,
	}
}

// Register installs both webhook configurations as the chart ships them.
func (s *webhookServer) Register(ctx context.Context, cfg config.Config) error {
	if err := admin.Create(ctx, registration.Validating(cfg, s.Options())); err != nil {
		return fmt.Errorf("registering the guard: %w", err)
	}
	if err := admin.Create(ctx, registration.Mutating(cfg, s.Options())); err != nil {
		return fmt.Errorf("registering the injector: %w", err)
	}
	return nil
}

// grantServerRBAC gives the server's identity what the chart's ClusterRole
// gives it.
func grantServerRBAC(ctx context.Context) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "runnerguard"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"actions.github.com"}, Resources: []string{"ephemeralrunners"}, Verbs: []string{"get"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "runnerguard"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "runnerguard"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: serverUser}},
	}
	if err := admin.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := admin.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// webhookCalls is the number of reviews the server has answered on path,
// from controller-runtime's own request counter.
func (s *webhookServer) webhookCalls(path string) (float64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", s.metricsPort))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, m := range families["controller_runtime_webhook_requests_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "webhook" && l.GetValue() == path {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total, nil
}

// logLines returns the server's JSON log lines whose msg is msg.
func (s *webhookServer) logLines(msg string) ([]map[string]any, error) {
	raw, err := os.ReadFile(s.logPath)
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(msg)) {
			continue
		}
		var m map[string]any
		if json.Unmarshal(line, &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out, nil
}
