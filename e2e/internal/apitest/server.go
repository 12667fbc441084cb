package apitest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/config"
)

// ServerUser is the webhook's identity; it holds only the RBAC that the
// chart grants its ServiceAccount (GrantRelease).
const ServerUser = "system:serviceaccount:runnerguard:runnerguard"

// MemoryLimit is the chart's default memory limit of the webhook container.
const MemoryLimit = 320 << 20

// ServerOptions say how to run the binary.
type ServerOptions struct {
	// WorkDir holds the binary, its config and kubeconfig.
	WorkDir string
	// Config is written to WorkDir/config.yaml and passed with --config.
	Config config.Config
	// LogName is the file under e2e/.artifacts that keeps the server's log.
	LogName string
	// Args are extra flags for `runnerguard serve`, e.g. a log level.
	Args []string
	// KubeconfigFromEnv passes the kubeconfig in KUBECONFIG instead of
	// --kubeconfig: the binary then loads it through ctrl.GetConfig, the
	// path of its in-cluster config, which turns client-side rate
	// limiting off (--kubeconfig keeps client-go's 5 requests per second).
	KubeconfigFromEnv bool
}

// Server is the real runnerguard binary, run as a process.
type Server struct {
	bin, kubeconfig, configPath, certDir string
	args                                 []string
	kubeconfigFromEnv                    bool
	// Port is the webhook server's HTTPS port on 127.0.0.1.
	Port                   int
	metricsPort, probePort int
	// pprofPort serves Go's pprof endpoints on 127.0.0.1, for HeapProfile.
	pprofPort int
	// CAData is the CA that signed the serving certificate.
	CAData []byte
	// LogPath is the file the server logs to.
	LogPath string
	// MetricsToken is a ServiceAccount token allowed to get /metrics.
	MetricsToken string

	mu   sync.Mutex
	cmd  *exec.Cmd
	logs *os.File
	// exited is closed once cmd has ended (its one Wait).
	exited chan struct{}
}

// errExited: the binary ended before it was ready, e.g. a port another
// process took between FreePort and its bind.
var errExited = errors.New("runnerguard exited before it was ready")

// RepoRoot is the module's root: the nearest parent of the working
// directory that holds go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// StartServer builds the binary, gives its identity the chart's RBAC,
// and runs it against c with envtest's serving certificate.
func StartServer(ctx context.Context, c *Cluster, o ServerOptions) (*Server, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	wio := c.Env.WebhookInstallOptions
	s := &Server{
		bin: filepath.Join(o.WorkDir, "runnerguard"), configPath: filepath.Join(o.WorkDir, "config.yaml"),
		certDir: wio.LocalServingCertDir, Port: wio.LocalServingPort, CAData: wio.LocalServingCAData, args: o.Args,
		kubeconfigFromEnv: o.KubeconfigFromEnv,
	}
	raw, err := yaml.Marshal(o.Config)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.configPath, raw, 0o600); err != nil {
		return nil, err
	}
	// Built as the image builds it (static, -trimpath), however the suite
	// was started: a cgo build links Go's plugin package (kustomize's
	// loader, through the plugin's kubectl libraries) and so exports every
	// symbol: a binary the image never ships, with more resident memory
	// for the suites to measure.
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", s.bin, "./cmd/runnerguard")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building runnerguard: %w", err)
	}
	rbac, err := GrantRelease(ctx, c.Client, s.Options())
	if err != nil {
		return nil, err
	}
	if s.MetricsToken, err = metricsReaderToken(ctx, c, rbac.MetricsReader); err != nil {
		return nil, err
	}
	user, err := c.Env.AddUser(envtest.User{Name: ServerUser}, nil)
	if err != nil {
		return nil, err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		return nil, err
	}
	s.kubeconfig = filepath.Join(o.WorkDir, "kubeconfig")
	if err := os.WriteFile(s.kubeconfig, kc, 0o600); err != nil {
		return nil, err
	}
	artifacts := filepath.Join(root, "e2e", ".artifacts")
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		return nil, err
	}
	s.LogPath = filepath.Join(artifacts, o.LogName)
	if s.logs, err = os.Create(s.LogPath); err != nil {
		return nil, err
	}
	for _, p := range []*int{&s.metricsPort, &s.probePort, &s.pprofPort} {
		if *p, err = FreePort(); err != nil {
			return nil, err
		}
	}
	return s, s.Start(ctx)
}

// Start runs the binary on its ports and waits until it is ready.
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.start(ctx)
}

func (s *Server) start(ctx context.Context) error {
	args := []string{"serve", "--config=" + s.configPath, "--cert-dir=" + s.certDir, fmt.Sprintf("--port=%d", s.Port),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", s.metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", s.probePort),
		fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", s.pprofPort)}
	if !s.kubeconfigFromEnv {
		args = append(args, "--kubeconfig="+s.kubeconfig)
	}
	cmd := exec.Command(s.bin, append(args, s.args...)...)
	// The chart's memory limit, passed as the chart passes it.
	cmd.Env = append(os.Environ(), fmt.Sprintf("MEMORY_LIMIT=%d", MemoryLimit))
	if s.kubeconfigFromEnv {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+s.kubeconfig)
	}
	cmd.Stdout, cmd.Stderr = s.logs, s.logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting runnerguard: %w", err)
	}
	s.cmd = cmd
	exited := make(chan struct{})
	s.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", s.probePort)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("%w (its log: %s)", errExited, s.LogPath)
		default:
		}
		resp, err := http.Get(ready)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// Stop ends the binary (SIGTERM, as the kubelet would).
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.exited
	s.cmd = nil
}

// Pid is the running binary's process id, or 0.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// URL is the HTTPS address of path on the server.
func (s *Server) URL(path string) string {
	return fmt.Sprintf("https://127.0.0.1:%d%s", s.Port, path)
}

// Options are the registration options pointing the API server at s.
func (s *Server) Options() registration.Options {
	return registration.Options{
		// ServerUser is the chart's ServiceAccount for this release.
		Name: "runnerguard", ReleaseNamespace: ReleaseNamespace, CertManagerNamespace: "cert-manager",
		ClientConfig: func(path string) admissionregistrationv1.WebhookClientConfig {
			url := s.URL(path)
			return admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: s.CAData}
		},
		DeleteFailurePolicy:   admissionregistrationv1.Fail,
		EvictionFailurePolicy: admissionregistrationv1.Fail,
		TimeoutSeconds:        5,
	}
}

// Register installs both webhook configurations as the chart renders them
// for cfg.
func (s *Server) Register(ctx context.Context, c client.Client, cfg config.Config) error {
	objs, err := registration.Render(cfg, s.Options())
	if err != nil {
		return err
	}
	if err := c.Create(ctx, objs.Validating); err != nil {
		return fmt.Errorf("registering the guard: %w", err)
	}
	if err := c.Create(ctx, objs.Mutating); err != nil {
		return fmt.Errorf("registering the injector: %w", err)
	}
	return nil
}

// RegisterInjectPolicy installs the injection's policy and the injector's
// webhook for the pods it hands over, as the chart registers them on 1.36
// and later (registration.Options.InjectPolicy), for the namespaces with
// labels alone: a suite runs the policy's path beside the webhook's.
func (s *Server) RegisterInjectPolicy(ctx context.Context, c client.Client, cfg config.Config, labels map[string]string) error {
	o := s.Options()
	o.Name, o.InjectPolicy = "policy-path", true
	objs, err := registration.Render(cfg, o)
	if err != nil {
		return err
	}
	for _, obj := range objs.InjectPolicyObjects(&metav1.LabelSelector{MatchLabels: labels}) {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("registering %s: %w", obj.GetName(), err)
		}
	}
	return nil
}

// ReleaseNamespace is where the replicas' leader election Lease lives, as
// in the chart's release namespace.
const ReleaseNamespace = "runnerguard"

// ReportSecrets are the Secrets the suites' reporters may read.
var ReportSecrets = []string{"reports-github", "reports-gitlab", "reports-sink", "reports-buildkite"}

// GrantRelease gives the server's identity what the chart grants the
// ServiceAccount of o's release, rendered from the chart (every reporter
// Secret of ReportSecrets among it), and the release namespace; it returns
// the roles it rendered.
func GrantRelease(ctx context.Context, c client.Client, o registration.Options) (*registration.RBAC, error) {
	rbac, err := registration.RenderRBAC(o, registration.ReportSecrets{GitHub: ReportSecrets[0], GitLab: ReportSecrets[1], Sink: ReportSecrets[2], Buildkite: ReportSecrets[3]})
	if err != nil {
		return nil, err
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: ServerUser}}
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ReleaseNamespace}}, rbac.Cluster,
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: rbac.Cluster.Name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: rbac.Cluster.Name},
			Subjects: subjects,
		}}
	for _, role := range rbac.Namespaced {
		objs = append(objs, role, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name, Namespace: role.Namespace},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
			Subjects: subjects,
		})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	return rbac, nil
}

// Replica starts another process of the same binary, config and identity
// (a second replica of the Deployment) on ports of its own, logging to
// logName.
func (s *Server) Replica(ctx context.Context, logName string) (*Server, error) {
	r := &Server{bin: s.bin, kubeconfig: s.kubeconfig, configPath: s.configPath, certDir: s.certDir, args: s.args, CAData: s.CAData,
		kubeconfigFromEnv: s.kubeconfigFromEnv, MetricsToken: s.MetricsToken}
	r.LogPath = filepath.Join(filepath.Dir(s.LogPath), logName)
	return r, r.startOnFreePorts(ctx)
}

// startOnFreePorts first starts r, a process with ports of its own, and
// starts it again on others when it ends before it is ready because
// another process took one of them since FreePort, at most three times.
// A restart (Start) keeps the ports: registrations name them.
func (r *Server) startOnFreePorts(ctx context.Context) error {
	var err error
	if r.logs, err = os.Create(r.LogPath); err != nil {
		return err
	}
	for range 3 {
		for _, p := range []*int{&r.Port, &r.metricsPort, &r.probePort, &r.pprofPort} {
			if *p, err = FreePort(); err != nil {
				return err
			}
		}
		if err = r.Start(ctx); !errors.Is(err, errExited) {
			return err
		}
	}
	return err
}

// Variant starts another process of the same binary and identity with
// config cfg and extra flags (later flags win), on ports of its own,
// logging to logName: a second installation beside s, e.g. one whose
// process a test stops.
func (s *Server) Variant(ctx context.Context, logName string, cfg config.Config, args ...string) (*Server, error) {
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	path := strings.TrimSuffix(s.configPath, ".yaml") + "-" + strings.TrimSuffix(logName, ".log") + ".yaml"
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, err
	}
	r := &Server{bin: s.bin, kubeconfig: s.kubeconfig, configPath: path, certDir: s.certDir, args: append(slices.Clone(s.args), args...), CAData: s.CAData,
		kubeconfigFromEnv: s.kubeconfigFromEnv, MetricsToken: s.MetricsToken}
	r.LogPath = filepath.Join(filepath.Dir(s.LogPath), logName)
	return r, r.startOnFreePorts(ctx)
}

// HeapProfile writes the running binary's heap profile (Go's pprof format,
// after a GC) to path: what a report's RSS figure is made of.
func (s *Server) HeapProfile(path string) error {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", s.pprofPort))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("heap profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Binary is the path of the built runnerguard binary, for its other
// commands (runnerguard why).
func (s *Server) Binary() string { return s.bin }

// Reconfigure restarts the process with cfg in place of its config, on the
// same ports and identity: a new leader with new settings.
func (s *Server) Reconfigure(ctx context.Context, cfg config.Config) error {
	raw, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(s.configPath, raw, 0o600); err != nil {
		return err
	}
	s.Stop()
	return s.Start(ctx)
}
