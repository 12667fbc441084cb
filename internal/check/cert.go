package check

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// certificates is cert-manager's Certificate resource, read unstructured:
// its Ready condition is all check needs, not cert-manager's module.
var certificates = schema.GroupVersionResource{Group: "cert-manager.io", Version: "v1", Resource: "certificates"}

// certificate reads the Certificate ref names (namespace/name, as the
// inject-ca-from annotation gives it) and judges it.
func certificate(ctx context.Context, c Clients, ref string) Certificate {
	crt := Certificate{Name: ref}
	ns, name, ok := strings.Cut(ref, "/")
	if !ok {
		crt.Name = ""
		return crt
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		crt.Problem = err.Error()
		return crt
	}
	u, err := dyn.Resource(certificates).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		crt.Problem = "not found (is cert-manager installed?)"
	case err != nil:
		crt.Problem = "cannot be read: " + err.Error()
	default:
		crt.Ready, crt.Problem = Ready(u)
	}
	return crt
}

// Ready reads a Certificate's Ready condition, as cert-manager writes it:
// true, or false and why (its reason and message).
func Ready(u *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != "Ready" {
			continue
		}
		if seen, ok := m["observedGeneration"].(int64); ok && seen < u.GetGeneration() {
			return false, fmt.Sprintf("cert-manager has not yet seen its spec's generation %d", u.GetGeneration())
		}
		if m["status"] == "True" {
			return true, ""
		}
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		return false, strings.TrimPrefix(reason+": "+msg, ": ")
	}
	return false, "no Ready condition yet (cert-manager has not issued it)"
}
