//go:build scale

package scale

import (
	"os"
	"path/filepath"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// startKCM runs the real kube-controller-manager from KUBEBUILDER_ASSETS as
// the admin of c, with only the controllers that kill runner pods in a
// fleet: the namespace controller (namespace deletion), pod GC (the pods of
// a lost node) and the garbage collector (the pods of a deleted
// EphemeralRunner). No serviceaccount controller: its default
// ServiceAccounts would change every pod's shape. With
// --use-service-account-credentials each controller asks the API server for
// its own ServiceAccount's token (TokenRequest, signed with envtest's
// service-account key), so the guard sees the namespace controller and pod
// GC under their real usernames, the ones config.Default exempts.
func startKCM(c *apitest.Cluster, dir, logPath string) (*apitest.Process, error) {
	kc, err := c.AdminKubeconfig(dir, "kube-controller-manager")
	if err != nil {
		return nil, err
	}
	return apitest.StartProcess("kube-controller-manager", filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager"), logPath, nil,
		"--kubeconfig="+kc, "--use-service-account-credentials=true", "--controllers=namespace,podgc,garbagecollector",
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0")
}
