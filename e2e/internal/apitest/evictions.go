package apitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// EvictionRequestsSince is the first minor whose eviction requests the
// suites run: lifecycle.k8s.io/v1alpha1 (gate EvictionRequestAPI, alpha
// and off by default) with kube-controller-manager's evictionrequest
// controller and its default evictor, as runnerguard supports them. The
// default suite's minor stays as it was, gate off.
var EvictionRequestsSince = utilversion.MajorMinor(1, 38)

// evictionControllers are the controllers of kube-controller-manager that
// run eviction requests, and only those: the suites play every other
// controller's part themselves.
const evictionControllers = "evictionrequest-controller,imperative-eviction-responder-controller"

// withEvictionRequests reports whether the binaries in KUBEBUILDER_ASSETS
// run eviction requests: a kube-apiserver of EvictionRequestsSince or newer
// and a kube-controller-manager beside it (make compat builds it for 1.38
// only). The default suite's 1.37 does not, and starts as before.
func withEvictionRequests() bool {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if _, err := os.Stat(filepath.Join(assets, "kube-controller-manager")); err != nil {
		return false
	}
	out, err := exec.Command(filepath.Join(assets, "kube-apiserver"), "--version").Output()
	if err != nil {
		return false
	}
	v, err := utilversion.ParseGeneric(strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes "))
	return err == nil && v.AtLeast(EvictionRequestsSince)
}

// serveEvictionRequests turns on env's eviction requests: the gate and the
// alpha group, so the API server serves them and keeps a pod's
// spec.evictionResponders.
func serveEvictionRequests(env *envtest.Environment) {
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("feature-gates", "EvictionRequestAPI=true")
	args.Set("runtime-config", "lifecycle.k8s.io/v1alpha1=true")
}

// startEvictionControllers runs kube-controller-manager's eviction-request
// controllers against c, each under its own ServiceAccount (the default
// evictor evicts as it would in a cluster), logging to logPath.
func startEvictionControllers(c *Cluster, dir, logPath string) (*Process, error) {
	kc, err := c.AdminKubeconfig(dir, "kube-controller-manager")
	if err != nil {
		return nil, err
	}
	return StartProcess("kube-controller-manager", filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-controller-manager"), logPath, nil,
		"--kubeconfig="+kc, "--use-service-account-credentials=true", "--controllers="+evictionControllers,
		"--feature-gates=EvictionRequestAPI=true", "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0")
}
