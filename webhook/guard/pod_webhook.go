package guard

import (
	"context"
	"errors"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Handler is the pod guard's admission handler, the room of pod deletes
// and evictions: it reads DELETE reviews of pods (the pod is the
// oldObject) and CREATE reviews of pods/eviction (the object is the
// Eviction, so the pod is read from the API). Exec and attach have their
// own (ConnectHandler, connect_webhook.go), and so have the deletes of a
// fleet's records (RecordHandler, record_webhook.go).
type Handler struct {
	Readers
	// Writer labels runner pods the pod watcher would miss, and Notes
	// writes through it the deletion notes the watcher reads; nil without
	// a watcher.
	Writer   client.Writer
	Notes    *deletion.Notes
	Recorder events.EventRecorder
	// Selected picks the namespaces the webhooks are registered for; nil:
	// every namespace a review names. A review of a pod elsewhere was not
	// sent by the API server: the guard writes nothing about it.
	Selected labels.Selector
	// NotesAfterDeletion: a deletion note is written only once the pod's
	// deletion shows (podDeleted), so a review the API server did not send
	// leaves none.
	NotesAfterDeletion bool
	// Refusals keeps each refusal on the runner's pod; nil without a
	// watcher, which alone copies them onto the runner's record.
	Refusals *refusal.Writer
	// after runs a review's effects once it is answered (after.go).
	after *afterAnswer
}

var _ admission.Handler = &Handler{}

// NewHandler returns a Handler reading the clock.
func NewHandler(cfg config.Config, r client.Reader, w client.Writer, rec events.EventRecorder) *Handler {
	return &Handler{Readers: Readers{Config: cfg, Reader: r, Now: time.Now, live: newPodReads(r)}, Writer: w, Notes: deletion.NewNotes(w, notesFailed), Recorder: rec, after: newAfterAnswer(afterSlots)}
}

// Handle judges one review, and hands what follows its answer to the
// pool: the admission.Handler around Review.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	return h.after.handler(h.Review).Handle(ctx, req)
}

// Review judges one review into its answer and what follows it.
func (h *Handler) Review(ctx context.Context, req admission.Request) (admission.Response, After) {
	facts, rv, err := h.facts(ctx, req)
	switch {
	case errors.Is(err, errBadRequest):
		return admission.Errored(http.StatusBadRequest, err), nil
	case errors.Is(err, errPodGone) && rv.dryRun:
		// `runnerguard check` evicts a pod that does not exist, as a dry
		// run, to learn whether the API server reaches the guard: with
		// failure policy Ignore only this warning tells an answer from a
		// failed call.
		return admission.Allowed("the pod is gone").WithWarnings(runnerpod.GoneWarning), nil
	case errors.Is(err, errPodGone):
		return admission.Allowed("the pod is gone"), nil
	case errors.Is(err, errNotGuarded):
		return admission.Allowed("runnerguard judges only pod deletes and evictions"), nil
	case errors.Is(err, errPodUnreadable):
		// Answer 429 so a drain retries rather than gives up on a
		// passing API error.
		logf.FromContext(ctx).Error(err, "eviction refused for now")
		return retryLater(err.Error()), nil
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err), nil
	}
	j := h.judge(ctx, facts, rv)
	return j.response, h.carryOut(ctx, j)
}

// judged is a review the guard judged: its answer, and the effects it
// leads to as data (effects.go), which runEffects (after.go) runs.
type judged struct {
	f  Facts
	d  Decision
	rv review
	w  writing
	// seen is what the guard saw of the review's pod before the answer.
	seen witness
	// noting: admitted deletions of running runners are noted.
	noting                 bool
	response               admission.Response
	told, counted, written []Effect
}

// judge decides the review of f and lists what follows the answer.
func (h *Handler) judge(ctx context.Context, f Facts, rv review) *judged {
	d := Decide(f, h.Config)
	j := &judged{f: f, d: d, rv: rv, w: h.writes(f, d, rv), seen: rv.seen, noting: h.Writer != nil, response: response(f.Operation, d)}
	if d.Allowed && j.w.counted && !j.seen.confirmed {
		// An allowed deletion can be applied before the work after the
		// answer runs, and a pod found terminating then would pass for a
		// review sent after its deletion began (no count, no note, no
		// deleter on record): confirm it now, while its deletion cannot
		// have begun. A refusal deletes nothing, so its confirmation waits.
		ok, err := h.confirm(ctx, f, j.seen)
		j.seen = witness{confirmed: ok, refuted: !ok && err == nil}
	}
	j.told = effectsOf(j, toldKinds)
	if j.w.counted {
		j.counted = effectsOf(j, countedKinds)
	}
	if j.w.any {
		j.written = effectsOf(j, writtenKinds)
	}
	return j
}

// Wait returns once the side effects of the reviews answered so far are
// done.
func (h *Handler) Wait() { h.after.wait() }

// review is what the request says beyond the pod: whether it is a dry run
// and the grace period asked for (-1 when not given).
type review struct {
	dryRun bool
	grace  int64
	// seen: the pod was read from the API server just now (an eviction's).
	seen witness
}

// witness is what the guard has seen of the review's pod in the API:
// there with the review's UID and not terminating (confirmed), or not
// (refuted); neither when it has not looked yet.
type witness struct{ confirmed, refuted bool }

var (
	errBadRequest    = errors.New("malformed admission review")
	errPodGone       = errors.New("pod not found")
	errPodUnreadable = errors.New("cannot read the pod to judge its eviction")
	errNotGuarded    = errors.New("not a guarded operation")
	evictionSubres   = "eviction"
)
