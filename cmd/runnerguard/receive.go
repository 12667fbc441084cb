package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
)

// receiveChunk is what one connection may hold uncharged while its bytes
// arrive: of the order of the TLS record buffers every connection holds
// anyway.
const receiveChunk = 32 << 10

// errReceiveFull is a review whose bytes found no room, within its wait,
// in what its sender, or the server, may hold while bodies are received.
var errReceiveFull = errors.New("too many review bytes in flight")

// receivePool charges ordinary review bodies (up to largeReviewBytes) for
// the bytes that have actually arrived, not for the length they declare,
// so a client that opens connections, declares bodies and sends nothing
// holds nothing: the budgets that bound decoding (reviewLimits) are charged
// only once a whole body is here. What is held while bodies arrive or wait
// for their path's budget is bounded for each sender's address and for the
// whole server, so one sender on the pod network cannot hold what the API
// server's reviews need.
//
// A body that would take its sender past its share waits for room, bounded
// by its review's wait: a sender's bodies are freed as its whole ones are
// answered, and a stalled one is cut at reviewReadTimeout.
type receivePool struct {
	total, perSender int64

	mu       sync.Mutex
	used     int64
	bySender map[string]int64
	// freed is closed, and replaced, whenever bytes are given back.
	freed chan struct{}
}

func newReceivePool(total, perSender int64) *receivePool {
	return &receivePool{total: total, perSender: perSender, bySender: map[string]int64{}, freed: make(chan struct{})}
}

// take charges n bytes to sender, waiting for room until ctx ends.
func (p *receivePool) take(ctx context.Context, sender string, n int64) error {
	for {
		p.mu.Lock()
		if p.used+n <= p.total && p.bySender[sender]+n <= p.perSender {
			p.used += n
			p.bySender[sender] += n
			p.mu.Unlock()
			return nil
		}
		freed := p.freed
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return errReceiveFull
		case <-freed:
		}
	}
}

func (p *receivePool) give(sender string, n int64) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used -= n
	if p.bySender[sender] -= n; p.bySender[sender] <= 0 {
		delete(p.bySender, sender)
	}
	close(p.freed)
	p.freed = make(chan struct{})
}

// received is a whole body and what it holds of a pool until release.
type received struct {
	body   []byte
	pool   *receivePool
	sender string
	held   int64
}

func (r *received) release() { r.pool.give(r.sender, r.held); r.held = 0 }

// receive reads body, of at most limit bytes, charging pool for the
// buffer as it grows. On an error nothing stays charged.
func receive(ctx context.Context, pool *receivePool, sender string, body io.Reader, limit int) (*received, error) {
	out := &received{pool: pool, sender: sender}
	chunk := make([]byte, receiveChunk)
	for {
		n, err := body.Read(chunk)
		if n > 0 {
			if len(out.body)+n > cap(out.body) {
				grown := max(min(2*cap(out.body), limit), len(out.body)+n)
				if err := pool.take(ctx, sender, int64(grown-cap(out.body))); err != nil {
					out.release()
					return nil, err
				}
				out.held += int64(grown - cap(out.body))
				out.body = append(make([]byte, 0, grown), out.body...)
			}
			out.body = append(out.body, chunk[:n]...)
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			out.release()
			return nil, err
		}
	}
}

// senderOf is the address a review came from, without its port: one
// client's many connections are one sender.
func senderOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
