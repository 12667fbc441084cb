//go:build fleets

package fleets

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/nodecluster"
)

// The cluster e2e/cluster brings up, and what the chart installs into it.
const (
	releaseNamespace = nodecluster.ReleaseNamespace
	// buildImage is the jobs' image: busybox (hack/node-images.sh).
	buildImage = nodecluster.RunnerImage
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
	repoRoot       string
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
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return 0, err
	}
	repoRoot = root
	cache := filepath.Join(root, ".cache")
	caFile = nodecluster.EnvOr("E2E_CA", filepath.Join(cache, "cluster", "pki", "ca.crt"))
	gitlabRunner = nodecluster.EnvOr("FLEETS_GITLAB_RUNNER", filepath.Join(cache, "fleets", "gitlab", "gitlab-runner"))
	c, err := nodecluster.Connect(root)
	if err != nil {
		return 0, err
	}
	adminCfg, admin, cs, kubeconfigPath = c.Config, c.Admin, c.Clientset, c.Kubeconfig
	nameLayouts()
	stop, err := startReports(root)
	if err != nil {
		return 0, fmt.Errorf("turning reports on: %w", err)
	}
	defer stop()
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
