//go:build karpenter

package karpenter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// startCluster is apitest.StartCluster with TaintNodesByCondition off: that
// admission plugin gives every new Node the not-ready taint, which only
// kube-controller-manager's node lifecycle controller removes, and it
// does not run here (kwok makes Karpenter's Nodes Ready, nothing else
// judges their health).
func startCluster(crds ...*apiextensionsv1.CustomResourceDefinition) (*apitest.Cluster, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run through make karpenter")
	}
	root, err := apitest.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDs: crds, ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths: []string{filepath.Join(root, "charts", "runnerguard", "templates", "crds")}}
	args := env.ControlPlane.GetAPIServer().Configure()
	// As apitest: 1.37 refuses envtest's loopback advertise address in its
	// endpoint reconciler; envtest's own default turns ServiceAccount off.
	args.Set("endpoint-reconciler-type", "none")
	args.Set("disable-admission-plugins", "ServiceAccount,TaintNodesByCondition")
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	c := &apitest.Cluster{Env: env, Config: cfg}
	if c.Client, err = client.New(cfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		_ = env.Stop()
		return nil, err
	}
	if c.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return c, nil
}
