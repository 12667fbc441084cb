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
// The test's own clients attack from podNetworkAddr, so they are not
// counted.
func countAPIServerConns(t *testing.T) (stop func() int) {
	t.Helper()
	u, err := url.Parse(server.URL("/"))
	require.NoError(t, err)
	port, err := strconv.Atoi(u.Port())
	require.NoError(t, err)
	// A server listening on every address sees IPv4 peers as IPv4-mapped
	// IPv6 ones, in tcp6.
	v4, v6 := "0100007F", "0000000000000000FFFF00000100007F"
	count := func() int {
		return establishedFrom("/proc/net/tcp", v4, port) + establishedFrom("/proc/net/tcp6", v6, port)
	}
	done, peak := make(chan struct{}), make(chan int)
	go func() {
		most := 0
		for {
			most = max(most, count())
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

// establishedFrom counts the established connections in table (a
// /proc/net file) whose local end is ip (in its hex form there) at port
// and whose peer is ip too.
func establishedFrom(table, ip string, port int) int {
	f, err := os.Open(table)
	if err != nil {
		return 0
	}
	defer f.Close()
	local := fmt.Sprintf("%s:%04X", ip, port)
	n := 0
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 3 && fields[1] == local && strings.HasPrefix(fields[2], ip+":") && fields[3] == "01" {
			n++
		}
	}
	return n
}
