package guard

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// afterAnswer runs what a review leads to beyond its answer (confirming
// that its pod exists with its UID, the Event, the deletion note, the
// log and metric) off the answer's path: a refusal is answered as soon as
// it is decided, and the reads and writes that make it known follow. Slots
// bound the work in flight, so a flood of reviews (anyone on the pod
// network can post one) holds bounded memory and bounded requests to the
// API server; when they are all busy the work is done before the answer,
// as it was before, which slows the flood, not the API server's other
// reviews.
type afterAnswer struct {
	slots   chan struct{}
	pending sync.WaitGroup
}

// afterTimeout bounds one review's work after its answer: a read or two
// and an Event (the note has its own wait, deletion.NoteWait).
const afterTimeout = 10 * time.Second

// afterSlots is how many reviews' work runs at once after their answers.
const afterSlots = 64

func newAfterAnswer(slots int) *afterAnswer {
	return &afterAnswer{slots: make(chan struct{}, slots)}
}

// do runs work after the answer, in a context of its own that keeps ctx's
// logger; or now, in ctx, when a is nil or every slot is busy.
func (a *afterAnswer) do(ctx context.Context, work func(context.Context)) {
	if a == nil {
		work(ctx)
		return
	}
	select {
	case a.slots <- struct{}{}:
	default:
		work(ctx)
		return
	}
	a.pending.Add(1)
	log := logf.FromContext(ctx)
	go func() {
		defer a.pending.Done()
		defer func() { <-a.slots }()
		// The review's context ends with the answer.
		actx, cancel := context.WithTimeout(logf.IntoContext(context.Background(), log), afterTimeout)
		defer cancel()
		work(actx)
	}()
}

// later runs work after the review's answer: once the whole answer is
// sent, for a review served through Serve; otherwise as do does.
func (a *afterAnswer) later(ctx context.Context, work func(context.Context)) {
	if p, ok := ctx.Value(pendingKey{}).(*pending); ok && a != nil && p.work == nil {
		// Counted from now, so a replica that stops waits for it.
		a.pending.Add(1)
		p.ctx, p.work = ctx, func(ctx context.Context) { defer a.pending.Done(); work(ctx) }
		return
	}
	a.do(ctx, work)
}

// pendingKey carries a review's pending work in its request's context.
type pendingKey struct{}

// pending is the work a review's answer leads to, and the context (its
// logger) it was handed over in.
type pending struct {
	ctx  context.Context
	work func(context.Context)
}

// Serve serves next, a webhook whose handler hands its work to later, and
// starts that work once the whole answer is sent: the answer is held until
// the handler returns, then written at once with its length and flushed,
// so the API server has read all of it (it reads an answer to its end)
// before the work starts. Not even starting it, a goroutine and the thread
// that picks it up, sits on the answer's path.
func (a *afterAnswer) Serve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := &pending{}
		// Deferred, so work handed over is done (and counted done) even if
		// the handler panics after handing it over.
		defer func() {
			if p.work != nil {
				a.do(p.ctx, p.work)
			}
		}()
		held := &heldAnswer{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(held, r.WithContext(context.WithValue(r.Context(), pendingKey{}, p)))
		held.send()
	})
}

// heldAnswer holds an answer's status and body until send. Its headers are
// the ResponseWriter's own.
type heldAnswer struct {
	http.ResponseWriter
	code int
	body bytes.Buffer
}

func (h *heldAnswer) WriteHeader(code int) { h.code = code }

func (h *heldAnswer) Write(b []byte) (int, error) { return h.body.Write(b) }

// send writes the answer with its length, in one write, and flushes it. A
// write that fails is the caller's gone: nothing to tell it.
func (h *heldAnswer) send() {
	h.Header().Set("Content-Length", strconv.Itoa(h.body.Len()))
	h.ResponseWriter.WriteHeader(h.code)
	_, _ = h.ResponseWriter.Write(h.body.Bytes())
	_ = http.NewResponseController(h.ResponseWriter).Flush()
}

// Start waits for the replica to stop, then for the work in flight, so a
// replica that is stopped finishes what its answers started (its notes
// among them: Notes, stopping alongside, waits for those already handed
// to it).
func (a *afterAnswer) Start(ctx context.Context) error {
	<-ctx.Done()
	a.wait()
	return nil
}

// NeedLeaderElection: every replica answers reviews.
func (a *afterAnswer) NeedLeaderElection() bool { return false }

// wait returns once the work in flight is done.
func (a *afterAnswer) wait() {
	if a != nil {
		a.pending.Wait()
	}
}
