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
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The flood of the security model's class 4: this many clients post reviews of about
// floodBytes each to the guard's path, without credentials, as anyone on
// the pod network can.
const (
	floodClients = 48
	floodBytes   = 4<<20 - 4<<10
)

// TestTheInjectorUnderAFloodOfTheGuardsPath times runner pod CREATEs, one
// at a time through the API server, which calls the injector, first with
// the server quiet, then while floodClients post the largest reviews the
// server admits to the guard's path of the same binary. It reports the
// injector's latency against its webhook timeout, how many pods the API
// server let in uninstrumented (the injector's failure policy is Ignore),
// and what the flood's reviews were answered.
func TestTheInjectorUnderAFloodOfTheGuardsPath(t *testing.T) {
	ctx := context.Background()
	n := min(apitest.EnvInt("LOAD_ROUNDS", 300), 200)
	timeout := time.Duration(server.Options().TimeoutSeconds) * time.Second
	const op = "runner pod CREATE (injector)"
	create := func(name string) (time.Duration, bool) {
		var got *corev1.Pod
		d, err := timed(func() (err error) {
			got, err = fast.CoreV1().Pods(nsGuard).Create(ctx, newRunner(nsGuard, name), metav1.CreateOptions{})
			return err
		})
		require.NoError(t, err)
		return d, got.Labels[runnerpod.RunnerLabel] != ""
	}
	series := func(prefix string) (times []time.Duration, uninstrumented int) {
		for i := range n {
			d, ok := create(fmt.Sprintf("%s-%d", prefix, i))
			times = append(times, d)
			if !ok {
				uninstrumented++
			}
		}
		return times, uninstrumented
	}
	for i := range min(maxWarmup, n) {
		create(fmt.Sprintf("warm-%d", i))
	}
	stopCounting := countAPIServerConns(t)
	quiet, quietMissed := series("quiet")

	stalledFor := map[string]int{}
	for _, path := range []string{registration.GuardPath, registration.ConnectPath, registration.InjectPath} {
		for range stalledPerPath {
			stallReview(t, path)
		}
		stalledFor[path] = stalledPerPath
	}
	stalled, stalledMissed := series("stalled")
	closeStalled(t)

	stopIdle := holdIdle(t)
	idle, idleMissed := series("idle")
	stopIdle()

	body := floodReview(t)
	client := tlsClient(t)
	client.Transport.(*http.Transport).DialContext = (&net.Dialer{LocalAddr: podNetworkAddr}).DialContext
	client.Timeout = 2 * maxFloodWait
	url := server.URL(registration.GuardPath) + "?timeout=" + timeout.String()
	var stop atomic.Bool
	codes := &floodCodes{byCode: map[int]int{}}
	var wg sync.WaitGroup
	for range floodClients {
		wg.Go(func() {
			for !stop.Load() {
				codes.add(floodOnce(client, url, body))
			}
		})
	}
	// The flood at its height: every client has had an answer.
	require.Eventually(t, func() bool { return codes.total() >= floodClients }, time.Minute, 50*time.Millisecond, "the flood's first answers")
	start := time.Now()
	flooded, floodMissed := series("flooded")
	elapsed := time.Since(start)
	stop.Store(true)
	wg.Wait()
	peakConns := stopCounting()

	report.AddLatency(op, "quiet", quiet, nil, "")
	report.AddLatency(op, fmt.Sprintf("%d connections to each webhook path declaring %d-byte reviews and sending nothing", stalledPerPath, stalledBytes), stalled, nil, "quiet")
	report.AddLatency(op, fmt.Sprintf("%d connections to the webhook port sending nothing, half after the TLS handshake, reopened as the server closes them", idleConns), idle, nil, "quiet")
	report.AddLatency(op, fmt.Sprintf("%d clients posting %d-byte reviews to the guard's path", floodClients, floodBytes), flooded, nil, "quiet")
	report.Notes = append(report.Notes,
		fmt.Sprintf("%s under the flood: p50 %s, p99 %s, max %s against the webhook timeout of %s; %d of %d pods let in uninstrumented (%d of %d quiet)",
			op, ms(percentile(flooded, 0.5)), ms(percentile(flooded, 0.99)), ms(percentile(flooded, 1)), timeout, floodMissed, n, quietMissed, n),
		fmt.Sprintf("%s while connections stalled: p50 %s, p99 %s, max %s; %d of %d pods let in uninstrumented",
			op, ms(percentile(stalled, 0.5)), ms(percentile(stalled, 0.99)), ms(percentile(stalled, 1)), stalledMissed, n),
		fmt.Sprintf("%s while connections sent nothing: p50 %s, p99 %s, max %s; %d of %d pods let in uninstrumented",
			op, ms(percentile(idle, 0.5)), ms(percentile(idle, 0.99)), ms(percentile(idle, 1)), idleMissed, n),
		fmt.Sprintf("the most connections the API server held open to the webhook at once, through every series: %d", peakConns),
		fmt.Sprintf("the flood's reviews, from its start to its end (the injector timed for %s of it): %s", elapsed.Round(time.Millisecond), codes))
	assert.Zero(t, stalledMissed, "no runner pod gets in uninstrumented while connections stall")
	assert.Zero(t, idleMissed, "no runner pod gets in uninstrumented while connections send nothing")
	removeAll(t, nsGuard)
}

// The stalled connections: this many to each webhook path, each declaring
// a review of stalledBytes (the most an ordinary review may be) and sending
// none of it, from podNetworkAddr: what anyone on the pod network can do
// without credentials and without bandwidth.
const (
	stalledPerPath = 32
	stalledBytes   = 1 << 20
)

// podNetworkAddr is where the attacks come from: an address of their own,
// as a pod's is, not the API server's.
var podNetworkAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}

var stalledConns []net.Conn

// stallReview opens a TLS connection to path from podNetworkAddr and sends
// a review's headers declaring stalledBytes, and nothing more.
func stallReview(t *testing.T, path string) {
	t.Helper()
	u, err := url.Parse(server.URL(path))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(server.CAData))
	conn, err := tls.DialWithDialer(&net.Dialer{LocalAddr: podNetworkAddr}, "tcp", u.Host, &tls.Config{RootCAs: pool, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
	require.NoError(t, err)
	stalledConns = append(stalledConns, conn)
	_, err = fmt.Fprintf(conn, "POST %s?timeout=10s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", u.Path, u.Host, stalledBytes)
	require.NoError(t, err)
}

func closeStalled(t *testing.T) {
	t.Helper()
	for _, c := range stalledConns {
		_ = c.Close()
	}
	stalledConns = nil
}

// maxFloodWait is the longest the server may hold a flood's review: its
// wait for budget follows the timeout the review claims.
const maxFloodWait = 30 * time.Second

// floodReview is an AdmissionReview of about floodBytes, as one of the
// flood posts it: the DELETE of a busy runner pod that does not exist, the
// bulk in its runner's env (many small objects: the costliest shape to
// decode), naming a requester.
func floodReview(t *testing.T) []byte {
	t.Helper()
	raw, err := apitest.BulkyRunnerPod(nsGuard, "flood", floodBytes)
	require.NoError(t, err)
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("flood"),
			Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Namespace: nsGuard, Name: "flood", Operation: admissionv1.Delete,
			OldObject: runtime.RawExtension{Raw: raw},
		},
	}
	review.Request.UserInfo.Username = "system:serviceaccount:" + nsGuard + ":mallory"
	out, err := json.Marshal(review)
	require.NoError(t, err)
	require.LessOrEqual(t, len(out), 4<<20, "the flood's reviews are within the server's limit")
	return out
}

// floodOnce posts one of the flood's reviews: its HTTP status, or 0 when
// the request failed.
func floodOnce(c *http.Client, url string, body []byte) int {
	resp, err := c.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// floodCodes counts the flood's answers by HTTP status.
type floodCodes struct {
	mu     sync.Mutex
	byCode map[int]int
}

func (c *floodCodes) add(code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.byCode[code]++
}

func (c *floodCodes) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.byCode {
		n += v
	}
	return n
}

func (c *floodCodes) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(c.byCode)) {
		what := fmt.Sprintf("answered %d %s", code, http.StatusText(code))
		if code == 0 {
			what = "failed (no answer within the client's timeout, or the connection broke)"
		}
		parts = append(parts, fmt.Sprintf("%d %s", c.byCode[code], what))
	}
	return strings.Join(parts, ", ")
}
