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
	policyv1 "k8s.io/api/policy/v1"
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

// TestAFloodOfWholeReviewsLetsNoReaperThrough: while whole reviews of
// the connect and eviction paths, each naming the large pod, flood the
// guard, a reaper's exec into and eviction of a busy runner are refused
// every time (as busy, or for now), never let through by a timeout (the
// connect path's failure policy is Ignore), and the flood is answered,
// never with a 503.
func TestAFloodOfWholeReviewsLetsNoReaperThrough(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	busy := create(t, nil, running(podtest.Runner(ns, "busy"), "runner"))
	large := create(t, as(t, reaper), largePod(ns, "large"))
	for _, tc := range []struct {
		path string
		body []byte
		try  func() error
	}{
		{registration.ConnectPath, connectReview(t, large), func() error { return connect(t, reaperSA, busy, "exec", "runner") }},
		{registration.GuardPath, evictionReview(t, large), func() error { return evict(as(t, reaper), busy, false) }},
	} {
		t.Run(tc.path, func(t *testing.T) {
			answered, unavailable, stop := flood(t, tc.path, tc.body)
			for i := range 3 {
				err := tc.try()
				assert.True(t, apierrors.IsForbidden(err) || apierrors.IsTooManyRequests(err),
					"try %d of 3 under the flood is refused, as busy or for now, not let through by a timeout: %v", i+1, err)
			}
			stop()
			assert.Zero(t, unavailable.Load(), "no flood review was answered 503")
			t.Logf("the flood's reviews answered: %d", answered.Load())
		})
	}
}

// flood posts body to path from floodSources addresses over
// floodConnsPerSource connections each, until stop, which it returns once
// every connection has answered once.
func flood(t *testing.T, path string, body []byte) (answered, unavailable *atomic.Int64, stop func()) {
	t.Helper()
	answered, unavailable = &atomic.Int64{}, &atomic.Int64{}
	ctx, cancel := context.WithCancel(context.Background())
	var posting sync.WaitGroup
	for i := range floodSources {
		c := floodClient(t, net.IPv4(127, 0, 0, byte(2+i)))
		for range floodConnsPerSource {
			posting.Go(func() {
				for ctx.Err() == nil {
					code, ok := floodReview(ctx, c, path, body)
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
	stop = func() { cancel(); posting.Wait() }
	t.Cleanup(stop)
	eventually(t, func() bool { return answered.Load() >= floodSources*floodConnsPerSource }, "the flood is answered")
	return answered, unavailable, stop
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

// evictionReview is an ordinary eviction review of pod as the API server
// would send it, from someone on the pod network.
func evictionReview(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	ev, err := json.Marshal(policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"}, ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}})
	require.NoError(t, err)
	return reviewOf(t, admissionv1.AdmissionRequest{
		UID: "flood", Operation: admissionv1.Create, Namespace: pod.Namespace, Name: pod.Name, SubResource: "eviction",
		Kind:     metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		UserInfo: authenticationv1.UserInfo{Username: "mallory"},
		Object:   runtime.RawExtension{Raw: ev},
	})
}

func reviewOf(t *testing.T, req admissionv1.AdmissionRequest) []byte {
	t.Helper()
	b, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	require.NoError(t, err)
	return b
}

// connectReview is an ordinary exec review of pod as the API server would
// send it, from someone on the pod network.
func connectReview(t *testing.T, pod *corev1.Pod) []byte {
	t.Helper()
	opts, err := json.Marshal(corev1.PodExecOptions{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodExecOptions"}, Container: "main", Command: []string{"sh"}})
	require.NoError(t, err)
	return reviewOf(t, admissionv1.AdmissionRequest{
		UID: "flood", Operation: admissionv1.Connect, Namespace: pod.Namespace, Name: pod.Name, SubResource: "exec",
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "PodExecOptions"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		UserInfo: authenticationv1.UserInfo{Username: "mallory"},
		Object:   runtime.RawExtension{Raw: opts},
	})
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

// floodReview posts one review to path and says the answer's HTTP status
// and whether it was an answer.
func floodReview(ctx context.Context, c *http.Client, path string, body []byte) (int, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server.URL(path+"?timeout=5s"), bytes.NewReader(body))
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
