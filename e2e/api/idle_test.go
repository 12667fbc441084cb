//go:build e2e

package api

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Anyone on the pod network can open connections to the webhook and send
// nothing: finish the TLS handshake and never send a header, or never
// finish the handshake. While an attacker at an address of its own keeps
// more of both open than one source may hold, reopening each as the server
// closes it, the API server's reviews of the guard, of connect and of the
// injector are answered as ever, and the connections over the limit are
// closed at once and counted.
//
// The file runs after hardening_test.go: the server's peak memory there is
// the process's high-water mark, which these connections would raise.
func TestConnectionsThatSendNothingHoldNoReview(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	busy := create(t, nil, running(podtest.Runner(ns, "busy"), "runner"))
	before := connsRefused(t)

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range attackConns {
		wg.Go(func() { holdOpen(ctx, t, i%2 == 0) })
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	eventually(t, func() bool { return connsRefused(t) > before }, "the attacker's source is at its limit")

	for i := range 5 {
		err := connect(t, reaperSA, busy, "exec", "runner")
		assert.True(t, apierrors.IsForbidden(err), "the reaper's exec is refused by the guard, not let through: %v", err)
		assert.True(t, apierrors.IsForbidden(deletePod(as(t, reaper), busy)), "the reaper's delete is refused")
		pod := create(t, nil, podtest.Runner(ns, fmt.Sprintf("instrumented-%d", i)).Obj())
		assert.NotEmpty(t, pod.Labels[runnerpod.RunnerLabel], "the runner pod was instrumented")
	}
	stop()
	wg.Wait()
	t.Logf("connections refused while the attack ran: %.0f", connsRefused(t)-before)
}

// attackConns is how many connections the attacker keeps opening, half
// idle after the handshake and half never finishing it: more than one
// source may hold.
const attackConns = 192

// holdOpen opens a connection to the webhook from 127.0.0.2, finishing the
// TLS handshake when handshake is set and sending nothing more either way,
// waits until the server closes it, and opens another, until ctx ends.
func holdOpen(ctx context.Context, t *testing.T, handshake bool) {
	u, err := url.Parse(server.URL("/"))
	require.NoError(t, err)
	pool := server.HTTPClient().Transport.(*http.Transport).TLSClientConfig.RootCAs
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	for ctx.Err() == nil {
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err != nil {
			continue
		}
		stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
		if handshake {
			tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
			if tc.HandshakeContext(ctx) == nil {
				_, _ = tc.Read(make([]byte, 1)) // until the server closes it
			}
		} else {
			_, _ = conn.Read(make([]byte, 1))
		}
		stop()
		_ = conn.Close()
		// A refused connection is closed at once: pace the next.
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// connsRefused is the server's count of connections refused because their
// source held its limit.
func connsRefused(t *testing.T) float64 {
	t.Helper()
	return serverCounter(t, server, "runnerguard_webhook_connections_refused_total", map[string]string{"reason": "source"})
}
