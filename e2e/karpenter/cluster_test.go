//go:build karpenter

package karpenter

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// clusterState counts what a stuck run needs first: the pods by phase and
// by whether they were bound, the Nodes, and Karpenter's NodeClaims.
func clusterState(ctx context.Context, c client.Client) string {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods); err != nil {
		return "pods not listed: " + err.Error()
	}
	phases := map[string]int{}
	for _, p := range pods.Items {
		bound := "unbound"
		if p.Spec.NodeName != "" {
			bound = "bound"
		}
		phases[string(p.Status.Phase)+"/"+bound]++
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return "nodes not listed: " + err.Error()
	}
	claims := &unstructured.UnstructuredList{}
	claims.SetGroupVersionKind(schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaimList"})
	nClaims := "unknown"
	if err := c.List(ctx, claims); err == nil {
		nClaims = fmt.Sprint(len(claims.Items))
	}
	return fmt.Sprintf("pods %v, %d nodes, %s NodeClaims", phases, len(nodes.Items), nClaims)
}
