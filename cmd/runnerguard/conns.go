package main

import (
	"net"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Connection limits, the defaults of --max-connections-per-source and
// --max-connections. Anyone on the pod network can open connections to the
// webhook port and hold them: a connection that never finishes its TLS
// handshake or never sends a header costs the server a goroutine and
// buffers until the server's deadlines close it. These bound how many one
// address, and everyone together, may hold open at once. The API server
// keeps a pool of keep-alive connections from its one address, so the
// per-source limit is far above what it opens under load (measured in
// docs/performance).
const (
	defaultMaxConnsPerSource = 128
	defaultMaxConns          = 1024
)

// connsRefused counts the connections closed at once because their source,
// or the server, held its limit.
var connsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "runnerguard_webhook_connections_refused_total",
	Help: "Connections to the webhook port closed on accept because their source address (reason=source) or the server (reason=total) held its limit of open connections.",
}, []string{"reason"})

func registerConnMetrics(reg prometheus.Registerer) error { return reg.Register(connsRefused) }

// connLimits is the decision: whether one more connection from a source
// fits, given what each source and everyone hold now.
type connLimits struct {
	perSource, total int

	mu       sync.Mutex
	open     int
	bySource map[string]int
}

func newConnLimits(perSource, total int) *connLimits {
	return &connLimits{perSource: perSource, total: total, bySource: map[string]int{}}
}

// admit counts one more connection from source, or says why it does not
// fit ("source" or "total") and counts nothing.
func (l *connLimits) admit(source string) (refused string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.bySource[source] >= l.perSource:
		return "source"
	case l.open >= l.total:
		return "total"
	}
	l.open++
	l.bySource[source]++
	return ""
}

func (l *connLimits) done(source string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.bySource[source]--; l.bySource[source] <= 0 {
		delete(l.bySource, source)
	}
}

// limitListener accepts connections within limits and closes the rest at
// once, before a TLS handshake or a goroutine is spent on them.
type limitListener struct {
	net.Listener
	limits  *connLimits
	refused func(reason string)
}

func (l limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		source := sourceOf(c.RemoteAddr())
		if reason := l.limits.admit(source); reason != "" {
			// Counted before the close, so whoever sees the close can
			// read the count.
			l.refused(reason)
			_ = c.Close()
			continue
		}
		return &limitedConn{Conn: c, release: sync.OnceFunc(func() { l.limits.done(source) })}, nil
	}
}

// limitedConn gives its place back once, however often it is closed.
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// sourceOf is a connection's address without its port: one client's many
// connections are one source.
func sourceOf(a net.Addr) string {
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}
