package main

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestConnLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		open   []string // sources already holding a connection
		closed []string // of those, closed since
		source string
		want   string
	}{
		{name: "a first connection fits", source: "10.0.0.1"},
		{name: "a source under its limit fits", open: []string{"10.0.0.1"}, source: "10.0.0.1"},
		{name: "a source at its limit is refused", open: []string{"10.0.0.1", "10.0.0.1"}, source: "10.0.0.1", want: "source"},
		{name: "another source fits while one is at its limit", open: []string{"10.0.0.1", "10.0.0.1"}, source: "10.0.0.2"},
		{name: "any source is refused when the server is at its total", open: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, source: "10.0.0.4", want: "total"},
		{name: "a closed connection gives its source's place back", open: []string{"10.0.0.1", "10.0.0.1"}, closed: []string{"10.0.0.1"}, source: "10.0.0.1"},
		{name: "a closed connection gives the total's place back", open: []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}, closed: []string{"10.0.0.3"}, source: "10.0.0.4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newConnLimits(2, 3)
			for _, s := range tc.open {
				require.Empty(t, l.admit(s))
			}
			for _, s := range tc.closed {
				l.done(s)
			}
			assert.Equal(t, tc.want, l.admit(tc.source))
		})
	}
}

// acceptAll accepts on l until it is closed, keeping what it accepted.
type acceptAll struct {
	mu       sync.Mutex
	accepted []net.Conn
	refused  []string
}

func (a *acceptAll) serve(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		a.mu.Lock()
		a.accepted = append(a.accepted, c)
		a.mu.Unlock()
	}
}

func (a *acceptAll) count() (accepted, refused int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.accepted), len(a.refused)
}

// dialFrom connects to addr from the loopback address ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByServer is whether the server closed c: a read ends at once
// rather than waiting for data that never comes.
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

func TestAListenerClosesConnectionsOverTheirSourcesLimitAtOnce(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := &acceptAll{}
	l := limitListener{Listener: inner, limits: newConnLimits(2, 3), refused: func(r string) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.refused = append(a.refused, r)
	}}
	t.Cleanup(func() { _ = l.Close() })
	go a.serve(l)
	addr := inner.Addr().String()

	dialFrom(t, "127.0.0.2", addr)
	dialFrom(t, "127.0.0.2", addr)
	require.Eventually(t, func() bool { n, _ := a.count(); return n == 2 }, time.Minute, 10*time.Millisecond)

	over := dialFrom(t, "127.0.0.2", addr)
	assert.True(t, closedByServer(over), "the source's third connection is closed")
	dialFrom(t, "127.0.0.1", addr)
	require.Eventually(t, func() bool { n, _ := a.count(); return n == 3 }, time.Minute, 10*time.Millisecond, "another source still gets in")
	assert.True(t, closedByServer(dialFrom(t, "127.0.0.3", addr)), "a connection over the total is closed")

	a.mu.Lock()
	first := a.accepted[0]
	a.mu.Unlock()
	require.NoError(t, first.Close())
	_ = first.Close() // closing twice gives back one place
	dialFrom(t, "127.0.0.2", addr)
	require.Eventually(t, func() bool { n, _ := a.count(); return n == 4 }, time.Minute, 10*time.Millisecond, "a closed connection's place is taken again")
	assert.True(t, closedByServer(dialFrom(t, "127.0.0.2", addr)), "and only once")

	_, refused := a.count()
	a.mu.Lock()
	defer a.mu.Unlock()
	assert.Equal(t, []string{"source", "total", "source"}, a.refused[:refused])
}

func TestServeRefusesConnectionLimitsThatCannotHold(t *testing.T) {
	for _, tc := range []struct {
		name            string
		perSource, all  int
		wantErrContains string
	}{
		{name: "the defaults hold", perSource: defaultMaxConnsPerSource, all: defaultMaxConns},
		{name: "one connection a source is the least", perSource: 1, all: 1},
		{name: "no connection a source is refused", perSource: 0, all: 10, wantErrContains: "--max-connections-per-source (0) must be at least 1"},
		{name: "a source allowed more than everyone is refused", perSource: 11, all: 10, wantErrContains: "at most --max-connections (10)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := serveOptions{reviewBudget: maxReviewBytes, maxConnsPerSource: tc.perSource, maxConns: tc.all}
			_, err := o.config()
			if tc.wantErrContains == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.wantErrContains)
		})
	}
}

// A connection that sends nothing, before or after its TLS handshake, is
// closed by the server; with Go's defaults it would be held for ever.
func TestTheServerClosesConnectionsThatSendNothing(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config = newHTTPServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshakes it cuts short
	srv.StartTLS()
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) net.Conn
	}{
		{name: "a connection that never starts its handshake", open: func(t *testing.T) net.Conn { return dialFrom(t, "127.0.0.1", addr) }},
		{name: "a connection that finishes its handshake and sends no header", open: func(t *testing.T) net.Conn {
			c := tls.Client(dialFrom(t, "127.0.0.1", addr), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test's own server
			require.NoError(t, c.Handshake())
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.True(t, closedByServer(tc.open(t)))
		})
	}
}
