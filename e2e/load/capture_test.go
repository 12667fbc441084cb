//go:build load

package load

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// nsCapture is where the API server's own AdmissionReviews are captured.
const nsCapture = "load-capture"

// capturer is a webhook of the test's own that keeps the first review of
// each operation the API server posts to it and allows everything.
type capturer struct {
	mu      sync.Mutex
	reviews map[admissionv1.Operation][]byte
}

func (c *capturer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var review admissionv1.AdmissionReview
	if err != nil || json.Unmarshal(body, &review) != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	if _, ok := c.reviews[review.Request.Operation]; !ok {
		c.reviews[review.Request.Operation] = body
	}
	c.mu.Unlock()
	review.Request, review.Response = nil, &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	_ = json.NewEncoder(w).Encode(review)
}

func (c *capturer) get(op admissionv1.Operation) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reviews[op]
}

// capturedReviews returns the AdmissionReviews kube-apiserver posts, byte
// for byte, for the CREATE of a generic runner pod and for the DELETE of
// subject (an instrumented pod whose runner has ended, created here with
// status).
func capturedReviews(t *testing.T, subject *corev1.Pod, status corev1.PodStatus) (create, del []byte) {
	t.Helper()
	ctx := context.Background()
	c := &capturer{reviews: map[admissionv1.Operation][]byte{}}
	srv := httptest.NewTLSServer(c)
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := srv.URL + "/capture"
	rule := func(op admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{op},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
	}
	only := &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: nsCapture}}
	cc := admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: ca}
	none := ptr.To(admissionregistrationv1.SideEffectClassNone)
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "load-capture"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "create.capture.load", ClientConfig: cc, Rules: rule(admissionregistrationv1.Create),
			NamespaceSelector: only, SideEffects: none, AdmissionReviewVersions: []string{"v1"}}}}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "load-capture"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "delete.capture.load", ClientConfig: cc, Rules: rule(admissionregistrationv1.Delete),
			NamespaceSelector: only, SideEffects: none, AdmissionReviewVersions: []string{"v1"}}}}
	require.NoError(t, cluster.Client.Create(ctx, mwc))
	require.NoError(t, cluster.Client.Create(ctx, vwc))
	defer func() {
		_ = cluster.Client.Delete(ctx, mwc)
		_ = cluster.Client.Delete(ctx, vwc)
	}()

	// The configurations take effect a moment after they are created:
	// dry-run creates until one is reviewed, then the real ones.
	pods := fast.CoreV1().Pods(nsCapture)
	require.Eventually(t, func() bool {
		_, err := pods.Create(ctx, newRunner(nsCapture, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		require.NoError(t, err)
		return c.get(admissionv1.Create) != nil
	}, 15*time.Second, 50*time.Millisecond, "the API server never called the capturing webhook")
	c.mu.Lock()
	delete(c.reviews, admissionv1.Create)
	c.mu.Unlock()
	_, err := pods.Create(ctx, newRunner(nsCapture, "created"), metav1.CreateOptions{})
	require.NoError(t, err)
	create = c.get(admissionv1.Create)

	subject = subject.DeepCopy()
	subject.Namespace = nsCapture
	createWithStatus(ctx, t, subject, status)
	require.NoError(t, pods.Delete(ctx, subject.Name, metav1.DeleteOptions{}))
	del = c.get(admissionv1.Delete)
	require.NotNil(t, create)
	require.NotNil(t, del)
	removeAll(t, nsCapture)
	return create, del
}
