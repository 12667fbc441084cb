package check

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// installed is a release's guard configuration as the chart labels it,
// its webhooks served by a Service in namespace.
func installed(release, namespace string) *admissionregistrationv1.ValidatingWebhookConfiguration {
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: release + "-runnerguard",
			Labels: map[string]string{"app.kubernetes.io/name": "runnerguard", "app.kubernetes.io/instance": release}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "eviction.guard.runnerguard.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: release}}}},
	}
}

// Every command finds the installation one way: the only one, or the one
// --release and --runnerguard-namespace choose.
func TestFind(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(installed("a", "rg-a"), installed("b", "rg-b"))

	_, err := Find(ctx, kube, "", "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2 runnerguard installations (releases a in rg-a, b in rg-b): name one with --release")

	for _, tc := range []struct{ release, namespace string }{{"b", ""}, {"", "rg-b"}, {"b", "rg-b"}} {
		in, err := Find(ctx, kube, tc.release, tc.namespace)
		require.NoError(t, err, tc)
		assert.Equal(t, Install{Release: "b", Name: "b-runnerguard", Namespace: "rg-b", Validating: in.Validating}, in, tc)
	}

	_, err = Find(ctx, kube, "a", "rg-b")
	var none NotInstalledError
	require.ErrorAs(t, err, &none)
	assert.Equal(t, "no ValidatingWebhookConfiguration labelled app.kubernetes.io/name=runnerguard,app.kubernetes.io/instance=a in namespace rg-b", none.Looked)
}
