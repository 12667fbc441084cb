//go:build e2e

package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// An EphemeralRunner deleted and made again under the same name is a new
// object: its "no job" says nothing of the old runner's pod, which keeps
// its job until it ends.
func TestAnEphemeralRunnerRecreatedUnderTheSameNameDoesNotReleaseTheOldPod(t *testing.T) {
	ns := newNamespace(t, nil)
	ctx := context.Background()
	newER := func() *unstructured.Unstructured {
		er := apitest.EphemeralRunner(ns, "arc-uid")
		require.NoError(t, admin.Create(ctx, er))
		return er
	}
	er := newER()
	pod := podtest.ARCScaleSet(ns, "arc-uid").RunningSince("runner", time.Now()).Obj()
	pod.OwnerReferences[0].UID = er.GetUID()
	pod = create(t, nil, pod)
	require.NoError(t, deletePod(as(t, reaper), pod, client.DryRunAll), "the pod's own idle EphemeralRunner releases it")

	// No garbage collector runs here, so the pod outlives its owner, as it
	// does for a moment in a cluster, or for good with orphan deletion.
	require.NoError(t, admin.Delete(ctx, er))
	recreated := newER()
	require.NotEqual(t, er.GetUID(), recreated.GetUID())
	err := deletePod(as(t, reaper), pod)
	require.True(t, apierrors.IsForbidden(err), "an idle namesake is not the pod's owner; got %v", err)
	assert.Contains(t, err.Error(), "not the pod's owner by UID")
	assert.True(t, alive(t, pod))
}

// No runner pins its node forever: past its preset's cap (168h for a
// generic pool) a delete goes through, with a warning that says so.
func TestARunnerPastItsCapMayBeDeleted(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, podtest.Runner(ns, "stuck").RunningSince("runner", time.Now().Add(-170*time.Hour)).Obj())
	young := create(t, nil, busyRunner(ns, "young"))
	c, warnings := warningsAs(t, reaper)
	require.NoError(t, deletePod(c, pod), "protection has expired")
	require.Len(t, *warnings, 1)
	assert.Contains(t, (*warnings)[0], "the protection expired: runner \"runner\" has run for 7d2h, past the 7d cap of preset generic", "durations as kubectl prints ages")
	assert.True(t, apierrors.IsTooManyRequests(evict(as(t, reaper), young, false)), "a runner inside its cap stays protected")
}

func TestMetricsNeedAnAuthorizedToken(t *testing.T) {
	get := func(token string) (int, string) {
		resp, err := server.GetMetrics(token)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, _ := get("")
	assert.Equal(t, http.StatusUnauthorized, code, "no token, no metrics")
	// controller-runtime's filter answers a token the API server rejects
	// with 500 ("Authentication failed"): refused all the same.
	code, body := get("not-a-token")
	assert.NotEqual(t, http.StatusOK, code)
	assert.NotContains(t, body, "controller_runtime")

	stranger := "stranger"
	if err := admin.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: stranger, Namespace: apitest.ReleaseNamespace}}); !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err) // made by an earlier run of the test (-count)
	}
	tr, err := cs.CoreV1().ServiceAccounts(apitest.ReleaseNamespace).CreateToken(context.Background(), stranger, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	code, _ = get(tr.Status.Token)
	assert.Equal(t, http.StatusForbidden, code, "a valid token without get on /metrics")

	code, body = get(server.MetricsToken)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "controller_runtime_webhook_requests_total")

	// Offered HTTP/2, both servers choose HTTP/1.1 (HTTP/2 off, as
	// kubebuilder scaffolds).
	for _, addr := range []string{server.MetricsURL(), server.URL(registration.GuardPath)} {
		u, err := url.Parse(addr)
		require.NoError(t, err)
		conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: server.HTTPClient().Transport.(*http.Transport).TLSClientConfig.RootCAs, NextProtos: []string{"h2", "http/1.1"}})
		require.NoError(t, err)
		assert.Equal(t, "http/1.1", conn.ConnectionState().NegotiatedProtocol, addr)
		conn.Close()
	}
}

// A review larger than any the API server sends is refused before it is
// read, and the server goes on answering.
func TestAnOversizedReviewIsRefusedAndTheServerCarriesOn(t *testing.T) {
	pid := server.Pid()
	ns := newNamespace(t, nil)
	for _, path := range []string{registration.GuardPath, registration.InjectPath} {
		code, _ := postReview(t, path, review(t, path, ns, 5<<20))
		assert.Equal(t, http.StatusRequestEntityTooLarge, code, path)
	}
	assert.Equal(t, pid, server.Pid())
	pod := create(t, nil, busyRunner(ns, "after"))
	assert.True(t, apierrors.IsForbidden(deletePod(as(t, reaper), pod)), "the guard still judges")
}

// The memory bound: a burst of the largest reviews the server admits, to
// both webhooks at once, keeps the process's peak resident memory (which
// bounds its heap) under half the chart's memory limit. The peak is the
// burst's own, from what the process held as it began: the kernel's
// high-water mark is reset first, or it would be the highest of every
// test that ran before in the suite, in whatever order they ran. What the
// burst adds is bounded by the soft memory limit the server set itself
// from the container's: the Go runtime holds no more than that.
func TestABurstOfTheLargestReviewsStaysUnderHalfTheMemoryLimit(t *testing.T) {
	const limit, burst = apitest.MemoryLimit, 16
	ns := newNamespace(t, nil)
	pid := server.Pid()
	before := peakRSS(t, pid)
	resetPeakRSS(t, pid)
	baseline := peakRSS(t, pid)
	bodies := map[string][]byte{}
	for _, path := range []string{registration.GuardPath, registration.InjectPath} {
		bodies[path] = review(t, path, ns, 4<<20-4<<10)
	}
	var wg sync.WaitGroup
	codes := make(chan int, 2*burst)
	for i := range 2 * burst {
		path := registration.GuardPath
		if i%2 == 1 {
			path = registration.InjectPath
		}
		wg.Go(func() {
			code, _ := postReview(t, path, bodies[path])
			codes <- code
		})
	}
	wg.Wait()
	close(codes)
	answered := 0
	for c := range codes {
		assert.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, c, "answered or asked to come back")
		if c == http.StatusOK {
			answered++
		}
	}
	require.Equal(t, pid, server.Pid(), "the server lived through the burst")
	hwm := peakRSS(t, pid)
	t.Logf("%d of %d largest reviews answered; peak RSS of the server %.1f MiB from %.1f MiB at the burst's start, %.1f MiB of it the binary's pages (limit %d MiB; the process's peak before the burst %.1f MiB)",
		answered, 2*burst, mib(hwm), mib(baseline), mib(procStatus(t, pid, "RssFile")), limit>>20, mib(before))
	assert.Less(t, hwm, int64(limit/2))
	soft := softMemoryLimit(t)
	assert.Less(t, hwm-baseline, soft, "the burst adds less than the soft memory limit, %.1f MiB", mib(soft))
}

// softMemoryLimit is the Go runtime's soft memory limit the server logged
// it set, last.
func softMemoryLimit(t *testing.T) int64 {
	t.Helper()
	lines, err := server.LogLines("soft memory limit set")
	require.NoError(t, err)
	require.NotEmpty(t, lines, "the server set no soft memory limit")
	b, ok := lines[len(lines)-1]["bytes"].(float64)
	require.True(t, ok, "the soft memory limit's line names its bytes: %v", lines[len(lines)-1])
	return int64(b)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// resetPeakRSS sets the process's resident high-water mark to what it
// holds now (proc(5), clear_refs).
func resetPeakRSS(t *testing.T, pid int) {
	t.Helper()
	require.NoError(t, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0), "resetting the server's peak RSS")
}

// peakRSS is the process's resident high-water mark (VmHWM), which the
// kernel keeps: no sampling can miss the peak.
func peakRSS(t *testing.T, pid int) int64 { return procStatus(t, pid, "VmHWM") }

// procStatus is a figure of /proc/pid/status, in bytes.
func procStatus(t *testing.T, pid int, key string) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/pid/status", key)
	return 0
}

// review is an AdmissionReview of about size bytes, as the API server
// would send it to path: a busy runner pod's DELETE to the guard, its
// CREATE to the injector, the bulk in the runner's env (many small
// objects: the costliest shape to decode).
func review(t *testing.T, path, ns string, size int) []byte {
	raw, err := apitest.BulkyRunnerPod(ns, "big", size)
	require.NoError(t, err)
	req := &admissionv1.AdmissionRequest{
		UID: types.UID("review-" + strconv.Itoa(size)), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: ns, Name: "big",
		Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: raw}, DryRun: ptr.To(true),
	}
	if path == registration.InjectPath {
		req.Operation, req.Object, req.OldObject = admissionv1.Create, runtime.RawExtension{Raw: raw}, runtime.RawExtension{}
	}
	out, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	require.NoError(t, err)
	require.LessOrEqual(t, len(out), size)
	return out
}

func postReview(t *testing.T, path string, body []byte) (int, []byte) {
	c := server.HTTPClient()
	c.Timeout = 2 * time.Minute
	resp, err := c.Post(server.URL(path), "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// Anyone on the pod network can open connections to the webhook, declare
// a body and never send it. Such reviews hold nothing: while many stall on
// every path, from an address of their own as a pod's would be, the API
// server's reviews are answered as ever. Before reviews were charged for
// the bytes that arrived, sixteen of them made the connect path answer 503
// (its failure policy is Ignore, so a reaper's exec got in) and the
// injector's (a runner pod got in uninstrumented).
func TestConnectionsThatDeclareABodyAndSendNothingHoldNoReview(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	busy := create(t, nil, running(podtest.Runner(ns, "busy"), "runner"))

	for _, path := range []string{registration.GuardPath, registration.ConnectPath, registration.InjectPath} {
		for range 32 {
			stallReview(t, path, largeReviewDeclared)
		}
	}

	err := connect(t, reaperSA, busy, "exec", "runner")
	assert.True(t, apierrors.IsForbidden(err), "the reaper's exec is refused by the guard, not let through: %v", err)
	assert.True(t, apierrors.IsForbidden(deletePod(as(t, reaper), busy)), "the reaper's delete is refused")
	pod := create(t, nil, podtest.Runner(ns, "instrumented").Obj())
	assert.NotEmpty(t, pod.Labels[runnerpod.RunnerLabel], "the runner pod was instrumented")
}

// largeReviewDeclared is what each stalled review declares: the most an
// ordinary review may be.
const largeReviewDeclared = 1 << 20

// stallReview opens a TLS connection to path from 127.0.0.2, sends a
// review's headers declaring declared bytes, and nothing more, until the
// test ends.
func stallReview(t *testing.T, path string, declared int) {
	t.Helper()
	u, err := url.Parse(server.URL(path))
	require.NoError(t, err)
	pool := server.HTTPClient().Transport.(*http.Transport).TLSClientConfig.RootCAs
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	conn, err := tls.DialWithDialer(d, "tcp", u.Host, &tls.Config{RootCAs: pool, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST %s?timeout=10s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Path, u.Host, declared)
	require.NoError(t, err)
}
