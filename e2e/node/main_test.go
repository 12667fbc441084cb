//go:build node

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// The cluster e2e/cluster brings up, and what the chart installs into it.
const (
	nodeName         = "runnerguard-node"
	releaseNamespace = "runnerguard"
	releaseName      = "runnerguard"
	runnerImage      = "runnerguard.local/e2e/runner:1"
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
	log.SetLogger(logr.Discard())
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	kubeconfigPath = envOr("E2E_KUBECONFIG", filepath.Join(root, ".cache", "cluster", "admin.kubeconfig"))
	kubectlBin = envOr("E2E_KUBECTL", filepath.Join(root, ".cache", "kube", "v1.37.2", "bin", "kubectl"))
	if adminCfg, err = clientcmd.BuildConfigFromFlags("", kubeconfigPath); err != nil {
		return err
	}
	adminCfg.WarningHandler = rest.NoWarnings{}
	if cs, err = kubernetes.NewForConfig(adminCfg); err != nil {
		return err
	}
	if err = v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return err
	}
	if admin, err = client.New(adminCfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		return err
	}
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
