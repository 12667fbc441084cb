package deletion

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// Notes writes the guard's deletion notes after the guard has answered: a
// note written before the answer would hold every allowed delete of a
// running runner for a create round trip through the API server, which is
// slowest exactly when the fleet is busiest. The recorder needs a note only
// when it records the death the delete causes, and waits for it up to
// NoteWait after it saw the deletion: a note is retried for that long after
// the answer.
// A note in flight is lost only with a replica that dies (a replica that is
// stopped writes what it holds first); the record then names no deleter.
type Notes struct {
	writer client.Writer
	// slots bounds the notes written at once; when they are all busy a
	// note gets one try in its caller's turn (once), so memory stays
	// bounded under a burst and no review waits out the webhook's timeout.
	slots chan struct{}
	// failed counts the notes not written while the recorder waited.
	failed  prometheus.Counter
	mu      sync.Mutex
	pending sync.WaitGroup
	stopped bool
}

// NewNotes returns a Notes writing through w, up to inFlight at once,
// counting on failed the notes it could not write in time.
func NewNotes(w client.Writer, inFlight int, failed prometheus.Counter) *Notes {
	return &Notes{writer: w, slots: make(chan struct{}, inFlight), failed: failed}
}

// Write writes n in the background; or tries once now, when every slot is
// busy or the replica is stopping.
func (s *Notes) Write(ctx context.Context, n *v1alpha1.RunnerDeletion) {
	s.WriteWhen(ctx, n, nil)
}

// WriteWhen is Write of a note that is written only if ready, called
// first in the note's own context, reports true: the review's object shows
// what the note says happened.
func (s *Notes) WriteWhen(ctx context.Context, n *v1alpha1.RunnerDeletion, ready func(context.Context) bool) {
	if ready != nil {
		ready = s.checked(n, ready)
	}
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		s.once(ctx, n, ready)
		return
	}
	select {
	case s.slots <- struct{}{}:
		s.pending.Add(1)
		s.mu.Unlock()
		log := logf.FromContext(ctx)
		go func() {
			defer s.pending.Done()
			defer func() { <-s.slots }()
			// The review's context ends with the answer: the note has its
			// own, which ends when the watcher stops waiting for it.
			s.write(logf.IntoContext(context.Background(), log), n, ready)
		}()
	default:
		s.mu.Unlock()
		s.once(ctx, n, ready)
	}
}

// checked logs a note that is not written because it was not ready: the
// one log of a dropped note.
func (s *Notes) checked(n *v1alpha1.RunnerDeletion, ready func(context.Context) bool) func(context.Context) bool {
	return func(ctx context.Context) bool {
		if ready(ctx) {
			return true
		}
		logf.FromContext(ctx).Info("no note: the reviewed object does not show the deletion",
			"object", n.Namespace+"/"+n.Deletion.Pod, "uid", n.Deletion.UID)
		return false
	}
}

// RetryEvery is how often a note is tried again, and a deletion looked for
// before one; the first try is at once.
const RetryEvery = 200 * time.Millisecond

// write creates n, retrying for as long as the watcher waits for a note. A
// note of that name already there is this deletion's (the first admitted
// deletion of a pod UID is the one that ends its runner).
func (s *Notes) write(ctx context.Context, n *v1alpha1.RunnerDeletion, ready func(context.Context) bool) {
	if ready != nil && !ready(ctx) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, NoteWait)
	defer cancel()
	var last error
	if err := wait.PollUntilContextCancel(ctx, RetryEvery, true, func(ctx context.Context) (bool, error) {
		last = s.create(ctx, n)
		return last == nil, nil
	}); err != nil {
		s.fail(ctx, n, last)
	}
}

// onceTimeout bounds the one try a note gets in its caller's turn, well
// within the webhook's timeout (the chart's 5 s).
const onceTimeout = time.Second

// once tries n once, in the caller's turn: the guard's pod reviews hand
// their notes over after their answers (their effects run then), the
// EphemeralRunner noter before its answer.
func (s *Notes) once(ctx context.Context, n *v1alpha1.RunnerDeletion, ready func(context.Context) bool) {
	if ready != nil {
		// The note waits for a deletion that may not show yet, and one
		// try cannot wait for it.
		s.fail(ctx, n, errors.New("every note slot is busy, and the note waits for a deletion that follows the answer"))
		return
	}
	ctx, cancel := context.WithTimeout(ctx, onceTimeout)
	defer cancel()
	if err := s.create(ctx, n); err != nil {
		s.fail(ctx, n, err)
	}
}

func (s *Notes) create(ctx context.Context, n *v1alpha1.RunnerDeletion) error {
	if err := s.writer.Create(ctx, n.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (s *Notes) fail(ctx context.Context, n *v1alpha1.RunnerDeletion, err error) {
	s.failed.Inc()
	logf.FromContext(ctx).Error(err, "noting the deletion for the death record: its record will name no deleter",
		"pod", n.Namespace+"/"+n.Deletion.Pod, "uid", n.Deletion.UID)
}

// Start waits for the replica to stop, then for the notes in flight; the
// notes of reviews answered after that get their one try in their callers'
// turn.
func (s *Notes) Start(ctx context.Context) error {
	<-ctx.Done()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.Wait()
	return nil
}

// Wait returns once the notes in flight are written or given up.
func (s *Notes) Wait() { s.pending.Wait() }

// NeedLeaderElection: every replica's guard answers, and writes notes.
func (s *Notes) NeedLeaderElection() bool { return false }
