//go:build e2e

package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/webhook/guard"
)

// The flood of the security reviews' connect path: whole, ordinary
// reviews, each naming one of largePods pods an editor made large, from
// floodSources addresses with floodConnsPerSource connections each (under
// the webhook's per-source and total connection limits), posted to the
// paths the API server calls in enforce namespaces. Reviews of one pod
// share its read; reviews of many hold every read slot and the path's
// budget, so the API server's own review must be refused, never failed.
const (
	floodSources        = 6
	floodConnsPerSource = 120
	largePods           = 64
	largePodEnvBytes    = 1100 << 10
)

// TestAFloodOfWholeReviewsLetsNoReaperThrough: while whole reviews of
// the connect and eviction paths, each naming one of the large pods,
// flood the guard, a reaper's exec into and eviction of a busy runner are
// refused every time (as busy, or for now), never let through by a
// timeout (the connect path's failure policy is Ignore).
func TestAFloodOfWholeReviewsLetsNoReaperThrough(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	busy := create(t, nil, running(podtest.Runner(ns, "busy"), "runner"))
	editor := as(t, reaper)
	large := make([]*corev1.Pod, largePods)
	for i := range large {
		large[i] = create(t, editor, largePod(ns, fmt.Sprintf("large-%d", i)))
	}
	for _, tc := range []struct {
		path   string
		review func(*testing.T, *corev1.Pod) []byte
		try    func() error
	}{
		{guard.ConnectModePath(config.ModeEnforce), connectReview, func() error { return connect(t, reaperSA, busy, "exec", "runner") }},
		{guard.ModePath(config.ModeEnforce), evictionReview, func() error { return evict(as(t, reaper), busy, false) }},
	} {
		t.Run(tc.path, func(t *testing.T) {
			bodies := make([][]byte, len(large))
			for i, p := range large {
				bodies[i] = tc.review(t, p)
			}
			answered, stop := flood(t, tc.path, bodies)
			for i := range 3 {
				err := tc.try()
				assert.True(t, apierrors.IsForbidden(err) || apierrors.IsTooManyRequests(err),
					"try %d of 3 under the flood is refused, as busy or for now, not let through by a timeout: %v", i+1, err)
			}
			stop()
			t.Logf("the flood's reviews answered: %d", answered.Load())
		})
	}
}

// flood posts bodies, in turn, to path from floodSources addresses over
// floodConnsPerSource connections each, until stop, which it returns once
// the flood has been answered as many times as it has connections.
func flood(t *testing.T, path string, bodies [][]byte) (answered *atomic.Int64, stop func()) {
	t.Helper()
	answered = &atomic.Int64{}
	ctx, cancel := context.WithCancel(context.Background())
	var posting sync.WaitGroup
	var clients []*http.Client
	for i := range floodSources {
		c := floodClient(t, net.IPv4(127, 0, 0, byte(2+i)))
		clients = append(clients, c)
		for j := range floodConnsPerSource {
			posting.Go(func() {
				for k := j; ctx.Err() == nil; k++ {
					if floodReview(ctx, c, path, bodies[k%len(bodies)]) {
						answered.Add(1)
					}
				}
			})
		}
	}
	// Its connections are closed with it: kept open, they would count
	// against the webhook's total of connections in the next flood.
	stop = func() {
		cancel()
		posting.Wait()
		for _, c := range clients {
			c.CloseIdleConnections()
		}
	}
	t.Cleanup(stop)
	eventually(t, func() bool { return answered.Load() >= floodSources*floodConnsPerSource }, "the flood is answered")
	return answered, stop
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

// floodReview posts one review to path and says whether it was answered
// (an answer or a refusal of the webhook server's).
func floodReview(ctx context.Context, c *http.Client, path string, body []byte) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server.URL(path+"?timeout=5s"), bytes.NewReader(body))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return true
}
