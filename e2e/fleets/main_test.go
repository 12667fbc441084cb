//go:build fleets

package fleets

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// The cluster e2e/cluster brings up, and what the chart installs into it.
const (
	releaseNamespace = "runnerguard"
	releaseName      = "runnerguard"
	// buildImage is the jobs' image: busybox (hack/node-images.sh).
	buildImage = "runnerguard.local/e2e/runner:1"
	// helperImage is busybox with this build of gitlab-runner as
	// gitlab-runner-helper (hack/fleets/gitlab.sh).
	helperImage = "runnerguard.local/e2e/gitlab-helper:1"
)

// The suite's shared state.
var (
	adminCfg       *rest.Config
	admin          client.Client
	cs             *kubernetes.Clientset
	kubeconfigPath string
	caFile         string
	gitlabRunner   string // the gitlab-runner binary
	runnerguardCLI string // the kubectl plugin, built by TestMain
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleets:", err)
		fmt.Fprintln(os.Stderr, "run it with make fleets (see docs/development/fleets.md)")
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	log.SetLogger(logr.Discard())
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return 0, err
	}
	cache := filepath.Join(root, ".cache")
	kubeconfigPath = envOr("E2E_KUBECONFIG", filepath.Join(cache, "cluster", "admin.kubeconfig"))
	caFile = envOr("E2E_CA", filepath.Join(cache, "cluster", "pki", "ca.crt"))
	gitlabRunner = envOr("FLEETS_GITLAB_RUNNER", filepath.Join(cache, "fleets", "gitlab", "gitlab-runner"))
	if _, err := os.Stat(gitlabRunner); err != nil {
		return 0, fmt.Errorf("gitlab-runner not built (hack/fleets/gitlab.sh): %w", err)
	}
	if adminCfg, err = clientcmd.BuildConfigFromFlags("", kubeconfigPath); err != nil {
		return 0, err
	}
	adminCfg.WarningHandler = rest.NoWarnings{}
	if cs, err = kubernetes.NewForConfig(adminCfg); err != nil {
		return 0, err
	}
	if err = v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return 0, err
	}
	if admin, err = client.New(adminCfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		return 0, err
	}
	if err := installed(); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "fleets-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	runnerguardCLI = filepath.Join(dir, "runnerguard")
	build := exec.Command("go", "build", "-o", runnerguardCLI, "./cmd/runnerguard")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("building the runnerguard CLI: %w: %s", err, out)
	}
	return m.Run(), nil
}

// installed checks that the chart runs in the cluster.
func installed() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := &appsv1.Deployment{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: releaseName}, d); err != nil {
		return fmt.Errorf("the chart is not installed: %w", err)
	}
	if d.Status.AvailableReplicas == 0 {
		return fmt.Errorf("no runnerguard pod is available")
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
