package apitest

import (
	"context"
	"path/filepath"
	"time"

	"errors"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// Cluster is a running kube-apiserver and etcd with an admin identity.
type Cluster struct {
	Env *envtest.Environment
	// AuditLog is the API server's audit log (JSON lines), where the
	// cluster was started with one: of pod writes (StartAuditedCluster), or
	// of the webhook's requests (StartClusterAuditingServer).
	AuditLog string
	// EvictionControllers is kube-controller-manager's eviction-request
	// controllers, where the binaries run eviction requests
	// (withEvictionRequests: make compat's 1.38); nil elsewhere.
	EvictionControllers *Process
	// Config is the admin's (system:masters) connection.
	Config    *rest.Config
	Client    client.Client
	Clientset *kubernetes.Clientset

	kcmDir string
}

// EventTTL is the suite API server's --event-ttl.
const EventTTL = 20 * time.Second

// StartCluster starts kube-apiserver and etcd from KUBEBUILDER_ASSETS with
// crds installed.
func StartCluster(crds ...*apiextensionsv1.CustomResourceDefinition) (*Cluster, error) {
	return startCluster("", crds)
}

// StartAuditedCluster is StartCluster with the API server's audit log of
// pod writes on (Cluster.AuditLog).
func StartAuditedCluster(crds ...*apiextensionsv1.CustomResourceDefinition) (*Cluster, error) {
	return startCluster(podsAuditPolicy, crds)
}

// StartClusterAuditingServer is StartCluster with the API server's audit
// log of every request the webhook's identity (ServerUser) makes, but its
// leader election's (Cluster.AuditLog): what its reviews cost the API
// server, request by request.
func StartClusterAuditingServer(crds ...*apiextensionsv1.CustomResourceDefinition) (*Cluster, error) {
	return startCluster(serverAuditPolicy, crds)
}

func startCluster(auditPolicy string, crds []*apiextensionsv1.CustomResourceDefinition) (*Cluster, error) {
	env, err := NewEnvironment(crds...)
	if err != nil {
		return nil, err
	}
	// Events expire within the suite, as they do after an hour in a real
	// cluster: the death records must not depend on them.
	env.ControlPlane.GetAPIServer().Configure().Set("event-ttl", EventTTL.String())
	var audit string
	if auditPolicy != "" {
		if audit, err = auditWith(env, auditPolicy); err != nil {
			return nil, err
		}
	}
	evictions := withEvictionRequests()
	if evictions {
		serveEvictionRequests(env)
	}
	c, err := Start(env)
	if err != nil {
		return nil, err
	}
	c.AuditLog = audit
	if evictions {
		if err := c.startEvictionControllers(); err != nil {
			_ = c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// startEvictionControllers starts c's eviction-request controllers, their
// log kept in e2e/.artifacts.
func (c *Cluster) startEvictionControllers() error {
	dir, err := Artifacts()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "runnerguard-kcm-")
	if err != nil {
		return err
	}
	c.kcmDir = tmp
	c.EvictionControllers, err = startEvictionControllers(c, tmp, filepath.Join(dir, "kube-controller-manager.log"))
	return err
}

// podsAuditPolicy keeps the metadata of each write to a pod or its
// subresources, as an operator's audit policy would at the least: where
// the admission policies' refusals are kept.
const podsAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [create, update, patch, delete]
  resources:
  - group: ""
    resources: [pods, pods/*]
- level: None
`

// serverAuditPolicy keeps the metadata of each request ServerUser makes
// but its leases' (leader election, on a clock of its own).
const serverAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  resources:
  - group: coordination.k8s.io
- level: Metadata
  users: ["` + ServerUser + `"]
- level: None
`

// auditWith turns on env's audit log with policy; it returns its path.
func auditWith(env *envtest.Environment, auditPolicy string) (string, error) {
	dir, err := os.MkdirTemp("", "runnerguard-audit-")
	if err != nil {
		return "", err
	}
	policy := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return "", err
	}
	log := filepath.Join(dir, "audit.log")
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", log)
	return log, nil
}

// controlPlaneStartTimeout is how long etcd and kube-apiserver each may
// take to become ready: how long a failure to start takes to show.
const controlPlaneStartTimeout = 3 * time.Minute

// NewEnvironment is kube-apiserver and etcd from KUBEBUILDER_ASSETS, not
// started, with runnerguard's CRDs as the chart ships them and crds, for a
// suite to configure further.
func NewEnvironment(crds ...*apiextensionsv1.CustomResourceDefinition) (*envtest.Environment, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the suite through make, which builds kube-apiserver and etcd")
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	// runnerguard's types in the clients' scheme.
	if err := v1alpha1.AddToScheme(scheme.Scheme); err != nil {
		return nil, err
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDs: crds,
		CRDDirectoryPaths: []string{filepath.Join(root, "charts", "runnerguard", "templates", "crds")}, ErrorIfCRDPathMissing: true}
	// envtest's own default start timeout is an idle machine's: kube-apiserver
	// on a loaded one (a CI runner, every suite of make test at once) takes
	// several times that to become ready. KUBEBUILDER_CONTROLPLANE_START_TIMEOUT
	// still wins.
	if os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT") == "" {
		env.ControlPlaneStartTimeout = controlPlaneStartTimeout
	}
	// 1.37 refuses a loopback advertise address in its endpoint reconciler;
	// envtest passes one, so turn the reconciler off.
	env.ControlPlane.GetAPIServer().Configure().Set("endpoint-reconciler-type", "none")
	return env, nil
}

// Start starts env and connects to it as the admin.
func Start(env *envtest.Environment) (*Cluster, error) {
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

// Artifacts is e2e/.artifacts, where the suites keep their logs and
// reports, made if missing.
func Artifacts() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "e2e", ".artifacts")
	return dir, os.MkdirAll(dir, 0o755)
}

// Stop ends kube-apiserver and etcd, and the controllers started beside
// them.
func (c *Cluster) Stop() error {
	if c.EvictionControllers != nil {
		c.EvictionControllers.Stop(context.Background())
		_ = os.RemoveAll(c.kcmDir)
	}
	err := c.Env.Stop()
	if c.AuditLog != "" {
		_ = os.RemoveAll(filepath.Dir(c.AuditLog))
	}
	return err
}
