//go:build scale

package scale

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/config"
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
	// Never rotated: every request of the run is counted (at 10,000
	// runners the log outgrows the default 100 MB).
	args.Set("audit-log-maxsize", "0")
	c, err := apitest.Start(env)
	return c, auditLog, err
}

// registerAsChart registers runnerguard as the chart does on this API
// server (1.37): the guard's and the injector's webhooks, every
// ValidatingAdmissionPolicy that says who may write the guard's signals,
// and the injection as a MutatingAdmissionPolicy (the webhook injector
// then sees only the pods the policy hands over).
func registerAsChart(ctx context.Context, s *apitest.Server, c client.Client, cfg config.Config) error {
	o := s.Options()
	o.InjectPolicy = true
	objs, err := registration.Render(cfg, o)
	if err != nil {
		return err
	}
	for _, obj := range append([]client.Object{objs.Validating, objs.Mutating, objs.InjectPolicy, objs.InjectBinding}, objs.PolicyObjects()...) {
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("registering %s: %w", obj.GetName(), err)
		}
	}
	return nil
}
