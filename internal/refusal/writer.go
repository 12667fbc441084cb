package refusal

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Writer is the one writer of a pod's refusals: the guard hands it each
// refusal after the answer (Note, on the guard's one pool of work after
// answers), and it merges them into the pod's annotation, one write in
// flight per pod, folding the refusals that arrive meanwhile into the next. Each write reads the pod
// from the API server and patches the annotation only if it is still as
// read (casPatch), so two replicas writing one pod never lose each other's
// refusals (the second's test fails and it merges again), and no change to
// the pod's other fields, at any rate, keeps a refusal off it.
type Writer struct {
	reader client.Reader
	writer client.Writer
	// Later, when set, holds a pod's refusals until none has come for
	// Settle (at most MaxHold after the first held), then writes them in
	// one patch: Later runs the write after the delay, on the pool that
	// runs the guard's work after answers. Each write of a pod is a new
	// copy of it, and a review the API server sends while its watch cache
	// still holds the copy before is sent again on the new one (the
	// storage retries a refused update found to be stale): writing after
	// every refusal of a reaper that retries at once would double its
	// reviews. Nil Later writes each pod's first refusal at once, on the
	// caller's goroutine.
	Later           func(ctx context.Context, delay time.Duration, work func(context.Context))
	Settle, MaxHold time.Duration
	mu              sync.Mutex
	// pending holds each pod's refusals not yet written; a pod is in it
	// while they are held and while its write is in flight.
	pending map[podUID]*held
}

// held is one pod's refusals not yet written, and when the first and the
// last of them came. While a write is in flight, the refusals that come
// meanwhile are held for the next.
type held struct {
	v1alpha1.Refusals
	first, last time.Time
}

// podUID is a pod as the guard confirmed it: a pod of that name with
// another UID is another runner.
type podUID struct {
	types.NamespacedName
	uid types.UID
}

// maxPods bounds the pods with refusals waiting: anyone who can reach the
// webhook can send reviews, and memory and requests stay bounded. Room
// for a drain's refusals of every busy runner of a node pool while they
// settle.
const maxPods = 2048

// writeTimeout bounds one pod's write, its retries on conflict included.
const writeTimeout = 30 * time.Second

// NewWriter returns a Writer reading pods through r, which must be the API
// server itself (a cache's resourceVersion could be stale for ever), and
// patching them through w.
func NewWriter(r client.Reader, w client.Writer) *Writer {
	return &Writer{reader: r, writer: w, pending: map[podUID]*held{}}
}

// Note keeps o on pod, if the pod still has uid when it is written. The
// write is made on the guard's pool of work after answers (so its bound is
// that pool's): with Later, once the pod's refusals have settled; without,
// on the caller's goroutine, which is that pool's, at once. Refusals noted
// while a pod's are held or its write is in flight are folded in and Note
// returns at once. Nil w notes nothing. The caller has confirmed that the API server
// sent the review (its pod exists with uid) and that it was no dry run.
func (w *Writer) Note(ctx context.Context, pod types.NamespacedName, uid types.UID, o One) {
	if w == nil {
		return
	}
	key := podUID{pod, uid}
	log := logf.FromContext(ctx)
	now := time.Now()
	w.mu.Lock()
	if p, ok := w.pending[key]; ok {
		p.Refusals = Add(p.Refusals, o)
		p.last = now
		w.mu.Unlock()
		return
	}
	if len(w.pending) >= maxPods {
		w.mu.Unlock()
		log.Info("refusal not kept: too many pods' refusals waiting to be written", "pod", pod, "requester", o.By)
		return
	}
	w.pending[key] = &held{Refusals: Add(v1alpha1.Refusals{}, o), first: now, last: now}
	w.mu.Unlock()
	if w.Later == nil {
		w.flush(ctx, key)
		return
	}
	w.Later(ctx, w.Settle, func(ctx context.Context) { w.due(ctx, key) })
}

// due writes key's held refusals once they have settled, or holds them
// until they do; after the write, the refusals that came meanwhile are
// held in turn.
func (w *Writer) due(ctx context.Context, key podUID) {
	w.mu.Lock()
	p := w.pending[key]
	now := time.Now()
	if wait := min(p.last.Add(w.Settle).Sub(now), p.first.Add(w.MaxHold).Sub(now)); wait > 0 {
		w.mu.Unlock()
		w.Later(ctx, wait, func(ctx context.Context) { w.due(ctx, key) })
		return
	}
	add := p.Refusals
	p.Refusals = v1alpha1.Refusals{}
	w.mu.Unlock()
	w.writeBatch(ctx, key, add)
	w.mu.Lock()
	if len(p.Entries) == 0 && p.Dropped == 0 {
		delete(w.pending, key)
		w.mu.Unlock()
		return
	}
	p.first = time.Now()
	w.mu.Unlock()
	w.Later(ctx, w.Settle, func(ctx context.Context) { w.due(ctx, key) })
}

// flush writes key's pending refusals until none are left.
func (w *Writer) flush(ctx context.Context, key podUID) {
	for {
		w.mu.Lock()
		p := w.pending[key]
		if len(p.Entries) == 0 && p.Dropped == 0 {
			delete(w.pending, key)
			w.mu.Unlock()
			return
		}
		add := p.Refusals
		p.Refusals = v1alpha1.Refusals{}
		w.mu.Unlock()
		w.writeBatch(ctx, key, add)
	}
}

// writeBatch writes one batch of a pod's refusals. Each batch has its own
// writeTimeout, whatever is left of the caller's: refusals that keep
// arriving for one pod are written in turn, not given up when the first
// caller's time ends.
func (w *Writer) writeBatch(ctx context.Context, key podUID, add v1alpha1.Refusals) {
	if err := w.write(context.WithoutCancel(ctx), key, add); err != nil {
		logf.FromContext(ctx).Error(err, "refusals not kept on the pod", "pod", key.NamespacedName, "count", len(add.Entries))
	}
}

// write merges add into the pod's stored refusals, with a patch that
// holds only while the annotation is as it was read (casPatch): the
// pod's other fields may change at any rate, a reaper's own patches of a
// pod it was refused on included, and the write still lands; a concurrent
// write of the refusals themselves (another replica's) fails the test,
// and the merge is done again. The retries are bounded (casBackoff, and
// writeTimeout), so no rate of writes makes the writer spin.
func (w *Writer) write(ctx context.Context, key podUID, add v1alpha1.Refusals) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	changed := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsInvalid(err) }
	return retry.OnError(casBackoff, changed, func() error {
		pod := runnerpod.Meta()
		if err := w.reader.Get(ctx, key.NamespacedName, pod); err != nil {
			if apierrors.IsNotFound(err) {
				return nil // gone: its record has what was on it
			}
			return err
		}
		if pod.UID != key.uid {
			return nil // another pod of that name
		}
		cur, err := current(pod.Annotations[Annotation])
		if err != nil {
			logf.FromContext(ctx).Error(err, "replacing refusals that do not parse", "pod", key.NamespacedName)
		}
		value, err := Format(Merge(cur, add))
		if err != nil {
			return err
		}
		patch, err := casPatch(pod.UID, pod.Annotations, value)
		if err != nil {
			return err
		}
		err = w.writer.Patch(ctx, pod, client.RawPatch(types.JSONPatchType, patch))
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// casBackoff spaces the writes of one batch of refusals: enough tries
// that a pod whose annotations someone keeps adding and removing (before
// its first refusal a reaper may remove every annotation it carries, and a
// test of an absent refusals value then fails by turns) still takes the
// batch, few enough, and spaced, that no one can make the writer spin.
var casBackoff = wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.1, Cap: time.Second}

// annotationPath is Annotation's JSON pointer (RFC 6901: "/" is "~1").
var annotationPath = "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(Annotation, "~", "~0"), "/", "~1")

// casPatch sets Annotation to value on the pod of uid, provided the
// annotations still hold what annotations (as read) hold of it: a JSON
// patch whose test operations compare the pod's UID and that one value
// (null for absent, which the API server's JSON patch takes as "not
// there"), never the pod's resourceVersion. A failed test is answered 422
// (Invalid), and the caller reads again.
func casPatch(uid types.UID, annotations map[string]string, value string) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	ops := []op{{"test", "/metadata/uid", uid}}
	old, had := annotations[Annotation]
	switch {
	case annotations == nil:
		ops = append(ops, op{"test", "/metadata/annotations", nil}, op{"add", "/metadata/annotations", map[string]string{Annotation: value}})
	case had:
		ops = append(ops, op{"test", annotationPath, old}, op{"replace", annotationPath, value})
	default:
		ops = append(ops, op{"test", annotationPath, nil}, op{"add", annotationPath, value})
	}
	return json.Marshal(ops)
}

// current is a pod's refusals: none without the annotation; a value that
// does not parse is counted dropped, so the next write replaces it and
// says something was lost.
func current(value string) (v1alpha1.Refusals, error) {
	if value == "" {
		return v1alpha1.Refusals{}, nil
	}
	l, err := Parse(value)
	if err != nil {
		return v1alpha1.Refusals{Dropped: 1}, err
	}
	return l, nil
}

// FromPod is the refusals a pod carries, nil when none or when they do
// not parse (the Writer alone writes them; the error says why).
func FromPod(annotations map[string]string) (*v1alpha1.Refusals, error) {
	value, ok := annotations[Annotation]
	if !ok {
		return nil, nil
	}
	l, err := Parse(value)
	if err != nil {
		return nil, err
	}
	return &l, nil
}
