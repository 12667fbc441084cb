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
	mu     sync.Mutex
	// pending holds each pod's refusals not yet written; a pod is in it
	// while its write is in flight, or handed on to Later.
	pending map[podUID]*v1alpha1.Refusals
	// Later runs work after what the caller is doing, as new work on the
	// guard's pool; nil: the caller writes on for as long as refusals
	// arrive.
	Later func(ctx context.Context, work func(context.Context))
}

// podUID is a pod as the guard confirmed it: a pod of that name with
// another UID is another runner.
type podUID struct {
	types.NamespacedName
	uid types.UID
}

// flushBatches is how many batches of one pod's refusals one caller
// writes before it hands the rest on (Writer.Later).
const flushBatches = 4

// maxPods bounds the pods with refusals waiting: anyone who can reach the
// webhook can send reviews, and memory and requests stay bounded.
const maxPods = 256

// writeTimeout bounds one pod's write, its retries on conflict included.
const writeTimeout = 30 * time.Second

// NewWriter returns a Writer reading pods through r, which must be the API
// server itself (a cache's resourceVersion could be stale for ever), and
// patching them through w.
func NewWriter(r client.Reader, w client.Writer) *Writer {
	return &Writer{reader: r, writer: w, pending: map[podUID]*v1alpha1.Refusals{}}
}

// Note keeps o on pod, if the pod still has uid when it is written. The
// write is made on the caller's goroutine, which is the guard's work after
// an answer (so its bound is that pool's): a pod's first refusal writes
// it, and while that write is in flight the refusals noted meanwhile are
// folded in and Note returns at once, for the writing caller to take them
// up. Nil w notes nothing. The caller has confirmed that the API server
// sent the review (its pod exists with uid) and that it was no dry run.
func (w *Writer) Note(ctx context.Context, pod types.NamespacedName, uid types.UID, o One) {
	if w == nil {
		return
	}
	key := podUID{pod, uid}
	log := logf.FromContext(ctx)
	w.mu.Lock()
	if p, ok := w.pending[key]; ok {
		*p = Add(*p, o)
		w.mu.Unlock()
		return
	}
	if len(w.pending) >= maxPods {
		w.mu.Unlock()
		log.Info("refusal not kept: too many pods' refusals waiting to be written", "pod", pod, "requester", o.By)
		return
	}
	l := Add(v1alpha1.Refusals{}, o)
	w.pending[key] = &l
	w.mu.Unlock()
	w.flush(ctx, key)
}

// flush writes key's pending refusals until none are left.
//
// One caller writes at most flushBatches batches: refusals that keep
// arriving for one pod (anyone on the pod network can post the reviews)
// are then handed on to Later, a new piece of work on the guard's pool,
// so no caller's work, and no slot of that pool, is held for ever.
func (w *Writer) flush(ctx context.Context, key podUID) {
	for batch := 0; ; batch++ {
		w.mu.Lock()
		p := w.pending[key]
		if len(p.Entries) == 0 && p.Dropped == 0 {
			delete(w.pending, key)
			w.mu.Unlock()
			return
		}
		if batch == flushBatches && w.Later != nil {
			// Still pending: the work handed on writes it.
			w.mu.Unlock()
			w.Later(ctx, func(ctx context.Context) { w.flush(ctx, key) })
			return
		}
		add := *p
		*p = v1alpha1.Refusals{}
		w.mu.Unlock()
		// Each batch has its own writeTimeout, whatever is left of the
		// caller's: refusals that keep arriving for one pod are written in
		// turn, not given up when the first caller's time ends.
		if err := w.write(context.WithoutCancel(ctx), key, add); err != nil {
			logf.FromContext(ctx).Error(err, "refusals not kept on the pod", "pod", key.NamespacedName, "count", len(add.Entries))
		}
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
