//go:build node

package node

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/nodecluster"
)

// The cluster e2e/cluster brings up, and what the chart installs into it.
const (
	nodeName         = nodecluster.NodeName
	releaseNamespace = nodecluster.ReleaseNamespace
	releaseName      = nodecluster.ReleaseName
	runnerImage      = nodecluster.RunnerImage
)

// The suite's shared state.
var (
	adminCfg *rest.Config
	admin    client.Client
	cs       *kubernetes.Clientset
	// kubectlBin is the cluster's own kubectl, for kubectl drain.
	kubectlBin     string
	kubeconfigPath string
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "node e2e:", err)
		fmt.Fprintln(os.Stderr, "bring the cluster up first: make cluster-up cluster-install (or make e2e-node)")
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func setup() error {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	kubectlBin = nodecluster.EnvOr("E2E_KUBECTL", filepath.Join(root, ".cache", "kube", "v1.37.2", "bin", "kubectl"))
	c, err := nodecluster.Connect(root)
	if err != nil {
		return err
	}
	adminCfg, admin, cs, kubeconfigPath = c.Config, c.Admin, c.Clientset, c.Kubeconfig
	return nil
}
