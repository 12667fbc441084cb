//go:build load

package load

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// idleConns is how many connections the idle attack keeps open from
// podNetworkAddr, half idle after the TLS handshake and half never
// finishing it: more than the server lets one source hold.
const idleConns = 192

// holdIdle starts the idle attack: each of idleConns connections sends
// nothing, and is opened again once the server closes it. It returns
// once the attack runs, with the function that ends it.
func holdIdle(t *testing.T) (stop func()) {
	t.Helper()
	u, err := url.Parse(server.URL("/"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(server.CAData))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	opened := make(chan struct{}, idleConns)
	for i := range idleConns {
		cfg := &tls.Config{RootCAs: pool, ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
		if i%2 == 1 {
			cfg = nil
		}
		wg.Go(func() { openIdle(ctx, u.Host, cfg, opened) })
	}
	for range idleConns {
		<-opened
	}
	return func() { cancel(); wg.Wait() }
}

// openIdle opens a connection to host from podNetworkAddr, finishing the
// TLS handshake when cfg is set, sends nothing, waits until the server
// closes it, and opens another, until ctx ends. It says on opened when
// its first connection is open.
func openIdle(ctx context.Context, host string, cfg *tls.Config, opened chan<- struct{}) {
	d := &net.Dialer{LocalAddr: podNetworkAddr}
	first := true
	for ctx.Err() == nil {
		conn, err := d.DialContext(ctx, "tcp", host)
		if err == nil {
			stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
			var c net.Conn = conn
			if cfg != nil {
				tc := tls.Client(conn, cfg)
				_ = tc.HandshakeContext(ctx)
				c = tc
			}
			if first {
				opened <- struct{}{}
				first = false
			}
			_, _ = c.Read(make([]byte, 1)) // until the server closes it
			stop()
			_ = conn.Close()
		}
		// A refused connection is closed at once: pace the next.
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// countAPIServerConns samples, until the function it returns is called,
// the established connections to the webhook's port from 127.0.0.1, where
// the API server's come from, and the function returns the most seen.
func countAPIServerConns(t *testing.T) (stop func() int) {
	t.Helper()
	u, err := url.Parse(server.URL("/"))
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	local := fmt.Sprintf("0100007F:%04X", port)
	done, peak := make(chan struct{}), make(chan int)
	go func() {
		most := 0
		for {
			most = max(most, establishedFromLoopback(local))
			select {
			case <-done:
				peak <- most
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() int { close(done); return <-peak }
}

// establishedFromLoopback counts /proc/net/tcp's established connections
// whose local end is local and whose peer is 127.0.0.1.
func establishedFromLoopback(local string) int {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 3 && fields[1] == local && strings.HasPrefix(fields[2], "0100007F:") && fields[3] == "01" {
			n++
		}
	}
	return n
}
