package guard

import (
	"context"
	"net/http"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet"
)

// This file is the one seam between the guard's rooms and the wire, and
// the one place that says when a review's effects run. Each room (the pod
// review, connect, a fleet's records) judges a review into its answer and
// what follows it (After); serve hands the answer to the API server and
// what follows to the one bounded pool (afterAnswer), once the whole
// answer is sent. The pod review's effects are data (Effect, effects.go),
// run by runEffects; the one write that must precede the answer,
// labelBeforeAnswer, is made while judging.

// After is what a review leads to beyond its answer; nil: nothing.
type After func(ctx context.Context)

// reviewer is a room's judgement of one review: its answer, and what
// follows it.
type reviewer func(ctx context.Context, req admission.Request) (admission.Response, After)

// in is r for the registration of mode's namespaces: the API server chose
// the mode (one registration per mode), so the guard answers in it.
func in(mode config.Mode, r reviewer) reviewer {
	return func(ctx context.Context, req admission.Request) (admission.Response, After) {
		return r(context.WithValue(ctx, modeKey{}, mode), req)
	}
}

// modeKey carries the mode the registration that called chose.
type modeKey struct{}

// serve serves r's reviews: decoded and answered by controller-runtime's
// webhook, what follows each answer run once it is whole sent (Serve).
func (a *afterAnswer) serve(r reviewer) http.Handler {
	return a.Serve(&admission.Webhook{Handler: a.handler(r)})
}

// handler is r as an admission.Handler that hands what follows its answer
// to later.
func (a *afterAnswer) handler(r reviewer) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		resp, after := r(ctx, req)
		if after != nil {
			a.later(ctx, after)
		}
		return resp
	})
}

// carryOut is what follows j's answer: the named exception is made now,
// before the answer; the rest (runEffects) after it.
func (h *Handler) carryOut(ctx context.Context, j *judged) After {
	if j.w.unlabelled {
		h.labelBeforeAnswer(ctx, j)
	}
	return func(ctx context.Context) { h.runEffects(ctx, j) }
}

// labelBeforeAnswer is the exception: an admitted deletion of a runner pod
// the injector never saw labels the pod before the answer, since the
// watcher's cache must hold the pod before the deletion removes it. Like
// every write, it is made only for a review the API server can have sent,
// of a pod there with the review's UID (forged.go); runEffects logs a
// review it does not act on.
func (h *Handler) labelBeforeAnswer(ctx context.Context, j *judged) {
	if h.unsent(ctx, j.f) != "" {
		return
	}
	if ok, _ := h.confirm(ctx, j.f, j.seen); !ok {
		return
	}
	if err := fleet.Label(ctx, h.Writer, j.f.Pod); err != nil {
		logf.FromContext(ctx).Error(err, "labelling the runner pod for the pod watcher", "pod", j.f.Pod.Namespace+"/"+j.f.Pod.Name)
	}
}

// runEffects carries out j's effects after its answer: none for a review
// the API server cannot have sent; its told effect (the log line); then,
// once the review's pod is confirmed, its count (the metric) and its
// writes, with who started the deletion where they name them.
func (h *Handler) runEffects(ctx context.Context, j *judged) {
	f := j.f
	log := logf.FromContext(ctx).WithValues("operation", f.Operation, "rule", j.d.Rule, "requester", f.Requester, "dryRun", j.rv.dryRun)
	if why := h.unsent(ctx, f); why != "" {
		log.Info(notActedOn, "why", why, "pod", f.Pod.Namespace+"/"+f.Pod.Name)
		return
	}
	for _, e := range j.told {
		e.carryOut(ctx, h, "")
	}
	if !j.w.counted {
		return
	}
	if ok, err := h.confirm(ctx, f, j.seen); !ok {
		log.Info("no metric, Event or note: the pod does not exist with the review's UID, or its deletion had begun", "pod", f.Pod.Namespace+"/"+f.Pod.Name, "uid", f.Pod.UID, "error", err)
		return
	}
	for _, e := range j.counted {
		e.carryOut(ctx, h, "")
	}
	// An allowed deletion's writes follow it: its note waits until the
	// deletion shows, and so does the rest (its Event), so that none
	// loads the API server while it is still carrying out the deletion
	// the answer let through.
	if shows := h.deletionShows(client.ObjectKeyFromObject(f.Pod), string(f.Pod.UID)); j.d.Allowed && len(j.written) > 0 && shows != nil && !shows(ctx) {
		// The note's own message (deletion.Notes), which operators and the
		// suites look for: the Event is left out with it.
		log.Info("no note: the reviewed object does not show the deletion", "object", f.Pod.Namespace+"/"+f.Pod.Name, "uid", f.Pod.UID, "event", false)
		return
	}
	var startedBy string
	if j.namesStarter() {
		startedBy = h.ownerDeleter(ctx, f.Pod, j.d.Runner)
	}
	for _, e := range j.written {
		e.carryOut(ctx, h, startedBy)
	}
}

// keptConnectRefusal keeps a refused exec or attach on the pod, after the
// answer, for a review the API server can have sent. A connect review
// names no pod UID: the refused pod is the one the room just read by name
// from the API server, and the writer writes only while it has that UID.
func (h *Handler) keptConnectRefusal(f Facts, d Decision) After {
	return func(ctx context.Context) {
		if h.unsent(ctx, f) == "" {
			h.Refusals.Note(ctx, client.ObjectKeyFromObject(f.Pod), f.Pod.UID, refusalOf(f, d))
		}
	}
}

// afterAnswer runs what a review leads to beyond its answer off the
// answer's path: a refusal is answered as soon as it is decided, and the
// reads and writes that make it known follow. Slots bound the work in
// flight, so a flood of reviews (anyone on the pod network can post one)
// holds bounded memory and bounded requests to the API server; when they
// are all busy the work runs on the review's own request once its answer
// is sent (Serve), which slows the flood, not the API server's other
// reviews.
type afterAnswer struct {
	slots   chan struct{}
	pending sync.WaitGroup
}

// afterTimeout bounds one review's work after its answer: a read or two
// and an Event (the note has its own wait, deletion.NoteWait).
const afterTimeout = 10 * time.Second

// afterSlots is how many reviews' work runs at once after their answers:
// room for a burst of job ends on a slow API server, each holding its slot
// while its note waits for the deletion, while the memory held stays small.
const afterSlots = 128

func newAfterAnswer(slots int) *afterAnswer {
	return &afterAnswer{slots: make(chan struct{}, slots)}
}

// do runs work in a goroutine, in a context of its own that keeps ctx's
// logger; or now, in such a context, when every slot is busy.
func (a *afterAnswer) do(ctx context.Context, work func(context.Context)) {
	// The review's context ends with the answer.
	run := func() {
		actx, cancel := context.WithTimeout(logf.IntoContext(context.Background(), logf.FromContext(ctx)), afterTimeout)
		defer cancel()
		work(actx)
	}
	select {
	case a.slots <- struct{}{}:
	default:
		run()
		return
	}
	a.pending.Add(1)
	go func() {
		defer a.pending.Done()
		defer func() { <-a.slots }()
		run()
	}()
}

// delayed runs work on the pool once delay has passed, counted as pending
// from now, so a replica that stops (and Wait) waits for it too. A timer
// holds no slot while it waits.
func (a *afterAnswer) delayed(ctx context.Context, delay time.Duration, work func(context.Context)) {
	a.pending.Add(1)
	time.AfterFunc(delay, func() {
		a.do(ctx, func(ctx context.Context) {
			defer a.pending.Done()
			work(ctx)
		})
	})
}

// later runs work after the review's answer: once the whole answer is
// sent, for a review served through Serve (as every review is in
// production); for one handled without it (a benchmark), as do does.
func (a *afterAnswer) later(ctx context.Context, work func(context.Context)) {
	if p, ok := ctx.Value(pendingKey{}).(*pending); ok && p.work == nil {
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
//
// The review's context ends before the API server stops waiting
// (AnswerDue), so that a read the answer waits on ends in time for the
// guard to answer itself, not the failure policy.
func (a *afterAnswer) Serve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), AnswerDue(r.URL.Query().Get("timeout"), 5*time.Second))
		defer cancel()
		r = r.WithContext(ctx)
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
func (a *afterAnswer) wait() { a.pending.Wait() }
