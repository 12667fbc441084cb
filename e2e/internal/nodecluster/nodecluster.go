// Package nodecluster connects a suite to the one-node cluster that
// e2e/cluster brings up, and checks that the chart runs in it: the setup
// the node suite and the real-fleet suite share.
package nodecluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	NodeName         = "runnerguard-node"
	ReleaseNamespace = "runnerguard"
	ReleaseName      = "runnerguard"
	// RunnerImage is busybox (hack/node-images.sh).
	RunnerImage = "runnerguard.local/e2e/runner:1"
)

// Cluster is a connection to the cluster as its admin.
type Cluster struct {
	// Root is the repository's root.
	Root string
	// Kubeconfig is the admin's kubeconfig file (E2E_KUBECONFIG, else the
	// one e2e/cluster writes).
	Kubeconfig string
	Config     *rest.Config
	Admin      client.Client
	Clientset  *kubernetes.Clientset
}

// Connect connects to the cluster of the repository at root as its admin,
// with the RunnerDeath types in the client's scheme, and fails unless a
// runnerguard pod is available.
func Connect(root string) (*Cluster, error) {
	log.SetLogger(logr.Discard())
	c := &Cluster{Root: root, Kubeconfig: EnvOr("E2E_KUBECONFIG", filepath.Join(root, ".cache", "cluster", "admin.kubeconfig"))}
	var err error
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return nil, err
	}
	c.Config.WarningHandler = rest.NoWarnings{}
	if c.Clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return nil, err
	}
	if err = v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return nil, err
	}
	if c.Admin, err = client.New(c.Config, client.Options{Scheme: scheme.Scheme}); err != nil {
		return nil, err
	}
	return c, c.installed()
}

// installed checks that the chart runs in the cluster.
func (c *Cluster) installed() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := &appsv1.Deployment{}
	if err := c.Admin.Get(ctx, client.ObjectKey{Namespace: ReleaseNamespace, Name: ReleaseName}, d); err != nil {
		return fmt.Errorf("the chart is not installed: %w", err)
	}
	if d.Status.AvailableReplicas == 0 {
		return fmt.Errorf("no runnerguard pod is available")
	}
	return nil
}

// EnvOr is the environment's value of key, or def when it is unset.
func EnvOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
