//go:build load

package load

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
)

// Bounds of each saturation step: LOAD_STEP_MS (default 3000) and
// stepRequests, whichever comes first.
const stepRequests = 20000

var stepDuration = time.Duration(apitest.EnvInt("LOAD_STEP_MS", 3000)) * time.Millisecond

// TestWebhookServerAloneUnderConcurrentReviews posts AdmissionReviews to
// the binary's HTTPS endpoint directly, with the CA envtest generated, at
// rising concurrency. The reviews are those kube-apiserver sent for a pod
// CREATE and DELETE, so decoding costs what it costs in a cluster. It runs first (files run in name order), before the
// latency test leaves death Events queued in the server's rate limiter.
func TestWebhookServerAloneUnderConcurrentReviews(t *testing.T) {
	ctx := context.Background()
	pods := fast.CoreV1()

	// The reviews are kube-apiserver's own, captured byte for byte: the
	// guard's is the DELETE of an instrumented pod whose runner has ended
	// (its death record is written once, later reviews of the same pod
	// skip it); the injector's is the CREATE of a generic runner pod.
	created, err := pods.Pods(nsGuard).Create(ctx, newRunner(nsGuard, "sat"), metav1.CreateOptions{})
	require.NoError(t, err)
	subject, status := subjectFrom(created, nsGuard, "sat-done")
	injectBody, guardBody := capturedReviews(t, subject, status)
	report.Notes = append(report.Notes, roundTrips(t, injectBody, "object"), roundTrips(t, guardBody, "oldObject"))

	client := tlsClient(t)
	for _, c := range []struct {
		path, what string
		body       []byte
		patched    bool
	}{
		{registration.GuardPath, "guard: allowed DELETE review", guardBody, false},
		{registration.InjectPath, "inject: CREATE review, patched", injectBody, true},
	} {
		url := server.URL(c.path)
		// One review first: the answer is the webhook's, not an error.
		got := post(t, client, url, c.body)
		require.True(t, got.Response.Allowed, "%s: %+v", c.what, got.Response.Result)
		require.Equal(t, c.patched, len(got.Response.Patch) > 0, "%s: patch %s", c.what, got.Response.Patch)
		for _, workers := range []int{1, 4, 16, 64} {
			s := saturate(client, url, c.body, workers)
			s.What = c.what
			report.Saturations = append(report.Saturations, s)
		}
	}
	removeAll(t, nsGuard)
}

// roundTrips says whether the pod in the review's field, re-encoded from
// the Pod type, gives back the API server's bytes: when it does, nothing
// in the pod is unknown to this build's types.
func roundTrips(t *testing.T, body []byte, field string) string {
	t.Helper()
	var review struct {
		Request map[string]json.RawMessage `json:"request"`
	}
	require.NoError(t, json.Unmarshal(body, &review))
	raw := []byte(review.Request[field])
	var pod corev1.Pod
	require.NoError(t, json.Unmarshal(raw, &pod))
	again, err := json.Marshal(&pod)
	require.NoError(t, err)
	return fmt.Sprintf("the API server's %s (%d bytes) re-encoded from corev1.Pod is byte-identical: %v", field, len(raw), bytes.Equal(raw, again))
}

// tlsClient trusts the CA that signed the server's certificate and speaks
// HTTP/2, as the API server's webhook client does.
func tlsClient(t *testing.T) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(server.CAData))
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
	}}
}

func post(t *testing.T, c *http.Client, url string, body []byte) admissionv1.AdmissionReview {
	t.Helper()
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var got admissionv1.AdmissionReview
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
	require.NotNil(t, got.Response)
	return got
}

// saturate posts body with workers concurrent clients until stepRequests
// were sent or stepDuration passed. An error is a failed request, a status
// other than 200, or an answer that does not allow.
func saturate(c *http.Client, url string, body []byte, workers int) Saturation {
	var sent, errs atomic.Int64
	lat := make([][]time.Duration, workers)
	cpu0, client0 := serverCPU(), ownCPU()
	start := time.Now()
	deadline := start.Add(stepDuration)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for sent.Add(1) <= stepRequests && time.Now().Before(deadline) {
				t0 := time.Now()
				ok := postOnce(c, url, body)
				lat[w] = append(lat[w], time.Since(t0))
				if !ok {
					errs.Add(1)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	s := Saturation{Workers: workers, Requests: len(all), Errors: int(errs.Load()), Elapsed: elapsed, Latency: all}
	if cpu := serverCPU() - cpu0; len(all) > 0 && cpu > 0 {
		s.CPUPerReview = cpu / time.Duration(len(all))
	}
	if len(all) > 0 {
		s.ClientCPUPerReview = (ownCPU() - client0) / time.Duration(len(all))
	}
	return s
}

func postOnce(c *http.Client, url string, body []byte) bool {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	return err == nil && resp.StatusCode == http.StatusOK && bytes.Contains(out, []byte(`"allowed":true`))
}

// ownCPU is the CPU time this process, the client, has used.
func ownCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time the runnerguard process has used (user and
// system), from /proc; 0 where it cannot be read.
func serverCPU() time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", server.Pid()))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses: utime and
	// stime are the 12th and 13th, in clock ticks of 1/100 s (USER_HZ).
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * 10 * time.Millisecond
}
