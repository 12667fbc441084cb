//go:build scale

package scale

import (
	"os"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

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
	env, err := apitest.NewEnvironment()
	if err != nil {
		return nil, "", err
	}
	policy, auditLog := filepath.Join(dir, "audit-policy.yaml"), filepath.Join(dir, "audit.log")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, "", err
	}
	// etcd's default 2 GiB quota is near what 60,000 pods and their
	// revisions between compactions take; a full etcd refuses every write.
	env.ControlPlane.Etcd = &envtest.Etcd{}
	env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.Itoa(8<<30))
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("event-ttl", apitest.EventTTL.String())
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", auditLog)
	args.Set("audit-log-format", "json")
	c, err := apitest.Start(env)
	return c, auditLog, err
}
