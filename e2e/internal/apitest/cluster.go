package apitest

import (
	"errors"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Cluster is a running kube-apiserver and etcd with an admin identity.
type Cluster struct {
	Env *envtest.Environment
	// Config is the admin's (system:masters) connection.
	Config    *rest.Config
	Client    client.Client
	Clientset *kubernetes.Clientset
}

// StartCluster starts kube-apiserver and etcd from KUBEBUILDER_ASSETS with
// crds installed.
func StartCluster(crds ...*apiextensionsv1.CustomResourceDefinition) (*Cluster, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the suite through make, which builds kube-apiserver and etcd")
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDs: crds}
	// 1.37 refuses a loopback advertise address in its endpoint reconciler;
	// envtest passes one, so turn the reconciler off.
	env.ControlPlane.GetAPIServer().Configure().Set("endpoint-reconciler-type", "none")
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	c := &Cluster{Env: env, Config: cfg}
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

// Stop ends kube-apiserver and etcd.
func (c *Cluster) Stop() error { return c.Env.Stop() }
