//go:build node

package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// renew asks cert-manager to re-issue the named Certificate now, as
// cmctl renew does: an Issuing condition on its status.
func renew(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	crt := &unstructured.Unstructured{}
	crt.SetAPIVersion("cert-manager.io/v1")
	crt.SetKind("Certificate")
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: name}, crt))
	conds, _, _ := unstructured.NestedSlice(crt.Object, "status", "conditions")
	conds = append(conds, map[string]any{
		"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
		"message": "re-issued by the node e2e suite", "observedGeneration": crt.GetGeneration(),
		"lastTransitionTime": time.Now().UTC().Format(time.RFC3339),
	})
	require.NoError(t, unstructured.SetNestedSlice(crt.Object, conds, "status", "conditions"))
	require.NoError(t, admin.Status().Update(ctx, crt))
}

// secretCert returns the first certificate in a Secret's key.
func secretCert(t *testing.T, name, key string) *x509.Certificate {
	t.Helper()
	s := &corev1.Secret{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: name}, s))
	block, _ := pem.Decode(s.Data[key])
	require.NotNil(t, block, "%s/%s holds a PEM certificate", name, key)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

// servedSerials returns the serial of the certificate each webhook pod
// serves, read over TLS on its bridge address.
func servedSerials(t *testing.T) []string {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, admin.List(context.Background(), pods, client.InNamespace(releaseNamespace),
		client.MatchingLabels{"app.kubernetes.io/instance": releaseName}))
	var out []string
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort(p.Status.PodIP, "9443"),
			&tls.Config{InsecureSkipVerify: true}) // read, not trusted: the point is which certificate is served
		if err != nil {
			out = append(out, "unreachable")
			continue
		}
		out = append(out, conn.ConnectionState().PeerCertificates[0].SerialNumber.String())
		conn.Close()
	}
	return out
}

// reviews keeps admission reviews flowing until stopped: a dry-run runner
// pod create (the injector; Ignore hides a failed call, so a pod without
// the sidecar counts as one) and a dry-run delete of a busy runner (the
// guard; its own refusal is the right answer, an error calling it is not).
type reviews struct {
	total, failed atomic.Int64
	mu            sync.Mutex
	failures      []string
	stop, done    chan struct{}
}

func startReviews(t *testing.T, ns string, busy *corev1.Pod) *reviews {
	r := &reviews{stop: make(chan struct{}), done: make(chan struct{})}
	reaperClient := as(t, reaper)
	go func() {
		defer close(r.done)
		for {
			select {
			case <-r.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			pod := webhookOnly(runnerPod(ns, "review", "64Mi"))
			err := admin.Create(context.Background(), pod, client.DryRunAll)
			r.note(err == nil && injected(pod), fmt.Sprintf("inject: %v, injected %v", err, injected(pod)))
			err = reaperClient.Delete(context.Background(), busy, client.DryRunAll)
			r.note(err != nil && strings.Contains(err.Error(), "runnerguard: runner container"), fmt.Sprintf("guard: %v", err))
		}
	}()
	return r
}

func (r *reviews) note(ok bool, what string) {
	r.total.Add(1)
	if !ok {
		r.failed.Add(1)
		r.mu.Lock()
		r.failures = append(r.failures, time.Now().Format("15:04:05.000")+" "+what)
		r.mu.Unlock()
	}
}

func (r *reviews) finish() { close(r.stop); <-r.done }

// more waits until n more reviews have been made.
func (r *reviews) more(t *testing.T, n int64, what string) {
	t.Helper()
	from := r.total.Load()
	require.Eventually(t, func() bool { return r.total.Load()-from >= n }, 2*time.Minute, 100*time.Millisecond, what)
}

func TestCertManagerRenewsTheServingCertificateAndTheCAWithoutAFailedReview(t *testing.T) {
	ns := newNamespace(t)
	busy := start(t, runnerPod(ns, "busy", "64Mi", "job", "600"))
	flow := startReviews(t, ns, busy)
	flow.more(t, 20, "reviews flowing before the renewals")

	// rollTo renews the named Certificate and waits until every webhook pod
	// serves the new serving certificate.
	rollTo := func(what, certificate string) *x509.Certificate {
		before := secretCert(t, "runnerguard-tls", "tls.crt")
		began := time.Now()
		renew(t, certificate)
		var served *x509.Certificate
		require.Eventually(t, func() bool {
			served = secretCert(t, "runnerguard-tls", "tls.crt")
			if served.SerialNumber.Cmp(before.SerialNumber) == 0 {
				return false
			}
			for _, s := range servedSerials(t) {
				if s != served.SerialNumber.String() {
					return false
				}
			}
			return true
		}, 3*time.Minute, time.Second, "the webhook pods serve the renewed certificate (%s)", what)
		t.Logf("%s: new serving certificate served by every webhook pod after %s", what, time.Since(began).Round(time.Second))
		return served
	}

	rollTo("serving certificate renewed", "runnerguard-serving-cert")
	oldCA := secretCert(t, "runnerguard-ca", "tls.crt")
	renew(t, "runnerguard-ca")
	require.Eventually(t, func() bool {
		return secretCert(t, "runnerguard-ca", "tls.crt").SerialNumber.Cmp(oldCA.SerialNumber) != 0
	}, time.Minute, time.Second, "cert-manager renews the CA")
	// The serving certificate is signed by the new CA when it is next
	// issued; renewing it now is what a rotation comes down to.
	served := rollTo("CA renewed, then the serving certificate", "runnerguard-serving-cert")
	newCA := secretCert(t, "runnerguard-ca", "tls.crt")
	assert.NoError(t, served.CheckSignatureFrom(newCA), "the serving certificate chains to the new CA")

	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKey{Name: releaseName}, vwc))
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(vwc.Webhooks[0].ClientConfig.CABundle))
	_, err := served.Verify(x509.VerifyOptions{Roots: pool, DNSName: "runnerguard.runnerguard.svc", CurrentTime: time.Now()})
	assert.NoError(t, err, "the caBundle cainjector put in place trusts the served certificate")

	flow.more(t, 50, "reviews answered with the renewed certificates")
	flow.finish()
	t.Logf("%d reviews, %d failed", flow.total.Load(), flow.failed.Load())
	assert.Zero(t, flow.failed.Load(), "failed reviews: %v", flow.failures)
	assert.Greater(t, flow.total.Load(), int64(100))
}
