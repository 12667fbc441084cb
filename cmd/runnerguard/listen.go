package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Connection deadlines. controller-runtime's webhook server waits long for
// a client's TLS handshake and header and cannot be told otherwise, so
// runnerguard serves the same mux itself with these.
const (
	// headerTimeout bounds the TLS handshake, and then reading a request's
	// header: the API server sends both at once, so this is far above
	// what it needs, while a client that opens connections and sends
	// nothing loses each soon.
	headerTimeout = 5 * time.Second
	// idleTimeout is how long a keep-alive connection waits for its next
	// request: the API server's client keeps idle connections as long, so
	// the server is not the side that closes one the API server is about
	// to reuse (a review is a POST, which its client does not retry).
	idleTimeout = 90 * time.Second
	// maxHeaderBytes bounds a request's header: the API server's is small.
	maxHeaderBytes = 64 << 10
	// shutdownTimeout is how long the server lets reviews in flight
	// finish once it is told to stop.
	shutdownTimeout = time.Minute
)

// limitedServer is controller-runtime's webhook server (its mux, its
// per-path metrics) served on a listener that bounds open connections, with
// deadlines on the handshake, the header and idle keep-alive connections.
type limitedServer struct {
	*webhook.DefaultServer
	limits  *connLimits
	started atomic.Bool
}

func newLimitedServer(o webhook.Options, limits *connLimits) *limitedServer {
	if o.WebhookMux == nil {
		o.WebhookMux = http.NewServeMux()
	}
	return &limitedServer{DefaultServer: webhook.NewServer(o).(*webhook.DefaultServer), limits: limits}
}

// Start serves until ctx ends, then lets reviews in flight finish.
func (s *limitedServer) Start(ctx context.Context) error {
	o := s.Options
	cfg := &tls.Config{}
	for _, op := range o.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		w, err := certwatcher.New(filepath.Join(o.CertDir, cmp.Or(o.CertName, "tls.crt")), filepath.Join(o.CertDir, cmp.Or(o.KeyName, "tls.key")))
		if err != nil {
			return err
		}
		cfg.GetCertificate = w.GetCertificate
		go func() {
			if err := w.Start(ctx); err != nil {
				ctrl.Log.Error(err, "certificate watcher error")
			}
		}()
	}
	inner, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return err
	}
	limited := limitListener{Listener: inner, limits: s.limits, refused: func(r string) { connsRefused.WithLabelValues(r).Inc() }}
	srv := newHTTPServer(o.WebhookMux)
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			ctrl.Log.Error(err, "shutting down the webhook server")
		}
	}()
	ctrl.Log.Info("serving webhooks", "port", o.Port, "maxConnsPerSource", s.limits.perSource, "maxConns", s.limits.total)
	s.started.Store(true)
	if err := srv.Serve(tls.NewListener(limited, cfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}

// newHTTPServer serves h with the connection deadlines. Go's server spends
// the header's deadline on the TLS handshake too, and counts the header's
// from the end of the handshake.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: headerTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes}
}

// StartedChecker is healthy once the server serves and a TLS handshake
// with it completes.
func (s *limitedServer) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server has not been started yet")
		}
		addr := net.JoinHostPort(s.Options.Host, strconv.Itoa(s.Options.Port))
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: headerTimeout}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reachability only
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}
