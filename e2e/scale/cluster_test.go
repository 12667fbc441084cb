//go:build scale

package scale

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// auditPolicy logs every request of runnerguard's identity (and nothing
// else) at Metadata level: the exact API requests it adds, by verb and
// resource, which apiserver_request_total cannot split by user.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["` + apitest.ServerUser + `"]
- level: None
`

// startCluster is apitest.StartCluster with the audit log on: kube-apiserver
// and etcd from KUBEBUILDER_ASSETS with runnerguard's CRDs.
func startCluster(dir string) (*apitest.Cluster, string, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, "", errors.New("KUBEBUILDER_ASSETS is not set: run through make scale")
	}
	root, err := apitest.RepoRoot()
	if err != nil {
		return nil, "", err
	}
	if err := v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return nil, "", err
	}
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, "", err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths: []string{filepath.Join(root, "charts", "runnerguard", "templates", "crds")}}
	// etcd's default 2 GiB quota is near what 60,000 pods and their
	// revisions between compactions take; a full etcd refuses every write.
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.Itoa(8<<30))
	args := env.ControlPlane.GetAPIServer().Configure()
	// As apitest: 1.37 refuses envtest's loopback advertise address in its
	// endpoint reconciler.
	args.Set("endpoint-reconciler-type", "none")
	args.Set("event-ttl", apitest.EventTTL.String())
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", auditLog)
	args.Set("audit-log-format", "json")
	cfg, err := env.Start()
	if err != nil {
		return nil, "", fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	c := &apitest.Cluster{Env: env, Config: cfg}
	if c.Client, err = client.New(cfg, client.Options{Scheme: scheme.Scheme}); err != nil {
		_ = env.Stop()
		return nil, "", err
	}
	if c.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = env.Stop()
		return nil, "", err
	}
	return c, auditLog, nil
}
