package check

import (
	"context"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Install is one runnerguard installation, as the cluster itself tells it.
type Install struct {
	// Release is the Helm release (label app.kubernetes.io/instance).
	Release string
	// Name is the chart's name for its objects: the webhook
	// configurations' and the ConfigMap's.
	Name string
	// Namespace is the release's namespace, where the ConfigMap is.
	Namespace string
	// Validating is the guard's webhook configuration.
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
}

// NotInstalledError: no webhook configuration carries the chart's label
// (and the release and namespace asked for); Looked says what was looked
// for.
type NotInstalledError struct{ Looked string }

func (e NotInstalledError) Error() string { return "runnerguard is not installed: " + e.Looked }

// installLabel is the label every object of the chart carries.
const installLabel = "app.kubernetes.io/name=runnerguard"

// Find is how every command finds the installation: by the chart's label
// on its ValidatingWebhookConfiguration. That object is cluster-scoped, so
// one list finds every release in every namespace, and it is the one
// object no working installation lacks; its name is the ConfigMap's and
// its Service (or CA annotation) names the release's namespace. release
// and namespace ("" for any) choose when the cluster has several.
func Find(ctx context.Context, kube kubernetes.Interface, release, namespace string) (Install, error) {
	sel := installLabel
	if release != "" {
		sel += ",app.kubernetes.io/instance=" + release
	}
	list, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return Install{}, fmt.Errorf("reading the webhook configurations: %w", err)
	}
	var found []Install
	for i := range list.Items {
		vwc := &list.Items[i]
		ns, _ := service(vwc)
		if namespace == "" || ns == namespace {
			found = append(found, Install{Release: vwc.Labels["app.kubernetes.io/instance"], Name: vwc.Name, Namespace: ns, Validating: vwc})
		}
	}
	switch len(found) {
	case 0:
		where := "no ValidatingWebhookConfiguration labelled " + sel
		if namespace != "" {
			where += " in namespace " + namespace
		}
		return Install{}, NotInstalledError{where}
	case 1:
		return found[0], nil
	}
	var names []string
	for _, in := range found {
		names = append(names, in.Release+" in "+in.Namespace)
	}
	return Install{}, fmt.Errorf("%d runnerguard installations (releases %s): name one with --release (and --runnerguard-namespace)", len(found), strings.Join(names, ", "))
}
