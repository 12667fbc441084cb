//go:build e2e

package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

// The flood of the security review's connect path: whole, ordinary
// connect reviews, each naming a pod an editor made large, from
// floodSources addresses with floodConnsPerSource connections each (under
// the webhook's per-source and total connection limits).
const (
	floodSources        = 6
	floodConnsPerSource = 120
	largePodEnvBytes    = 1100 << 10
)

// TestAFloodOfWholeConnectReviewsLetsNoReapersExecThrough: while the flood
// runs, a reaper's exec into a busy runner is refused every time (as busy,
// or for now), never let through by the API server's failure policy
// (Ignore on this path) after a timeout, and the flood is answered, never
// with a 503.
func TestAFloodOfWholeConnectReviewsLetsNoReapersExecThrough(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	busy := create(t, nil, running(podtest.Runner(ns, "busy"), "runner"))
	large := create(t, as(t, reaper), largePod(ns, "large"))
	body := connectReview(t, large)

	ctx, stop := context.WithCancel(context.Background())
	var answered, unavailable atomic.Int64
	var flood sync.WaitGroup
	for i := range floodSources {
		c := floodClient(t, net.IPv4(127, 0, 0, byte(2+i)))
		for range floodConnsPerSource {
			flood.Go(func() {
				for ctx.Err() == nil {
					code, ok := floodReview(ctx, c, body)
					if ok {
						answered.Add(1)
					}
					if code == http.StatusServiceUnavailable {
						unavailable.Add(1)
					}
				}
			})
		}
	}
	t.Cleanup(func() { stop(); flood.Wait() })
	eventually(t, func() bool { return answered.Load() >= floodSources*floodConnsPerSource }, "the flood is answered")

	for i := range 3 {
		err := connect(t, reaperSA, busy, "exec", "runner")
		assert.True(t, apierrors.IsForbidden(err) || apierrors.IsTooManyRequests(err),
			"exec %d of 3 under the flood is refused, as busy or for now, not let through by a timeout: %v", i+1, err)
	}
	stop()
	flood.Wait()
	assert.Zero(t, unavailable.Load(), "no flood review was answered 503")
	t.Logf("the flood's reviews answered: %d", answered.Load())
}

// largePod is a pod of about largePodEnvBytes, most of it in its
// container's environment, as anyone with edit in the namespace can make.
func largePod(ns, name string) *corev1.Pod {
	var env []corev1.EnvVar
	for i := 0; i*(100<<10) < largePodEnvBytes; i++ {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("PAD_%d", i), Value: strings.Repeat("x", 100<<10)})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox", Env: env}}},
	}
}

// connectReview is an ordinary exec review of pod as the API server would
// send it, from someone on the pod network.
func connectReview(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	opts, err := json.Marshal(corev1.PodExecOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodExecOptions"}, Container: "main", Command: []string{"sh"}})
	require.NoError(t, err)
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "flood", Operation: admissionv1.Connect, Namespace: pod.Namespace, Name: pod.Name, SubResource: "exec",
			Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			UserInfo: authenticationv1.UserInfo{Username: "mallory"},
			Object:   runtime.RawExtension{Raw: opts},
		},
	})
	require.NoError(t, err)
	return b
}

// floodClient posts from addr over keep-alive connections, at most
// floodConnsPerSource of them.
func floodClient(t *testing.T, addr net.IP) *http.Client {
	t.Helper()
	base := server.HTTPClient().Transport.(*http.Transport)
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: addr}}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: d.DialContext, TLSClientConfig: base.TLSClientConfig.Clone(),
		MaxConnsPerHost: floodConnsPerSource, MaxIdleConnsPerHost: floodConnsPerSource,
	}}
}

// floodReview posts one review to the guard's connect path and says the
// answer's HTTP status and whether it was an answer.
func floodReview(ctx context.Context, c *http.Client, body []byte) (int, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server.URL(registration.ConnectPath+"?timeout=5s"), bytes.NewReader(body))
	if err != nil {
		return 0, false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	var review admissionv1.AdmissionReview
	ok := json.NewDecoder(resp.Body).Decode(&review) == nil && review.Response != nil
	return resp.StatusCode, ok
}
