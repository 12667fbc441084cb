//go:build karpenter

package karpenter

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// startCluster is apitest.StartCluster with TaintNodesByCondition off: that
// admission plugin gives every new Node the not-ready taint, which only
// kube-controller-manager's node lifecycle controller removes, and it
// does not run here (kwok makes Karpenter's Nodes Ready, nothing else
// judges their health).
func startCluster(crds ...*apiextensionsv1.CustomResourceDefinition) (*apitest.Cluster, error) {
	env, err := apitest.NewEnvironment(crds...)
	if err != nil {
		return nil, err
	}
	// ServiceAccount stays off too, as envtest's own default has it.
	env.ControlPlane.GetAPIServer().Configure().Set("disable-admission-plugins", "ServiceAccount,TaintNodesByCondition")
	return apitest.Start(env)
}
