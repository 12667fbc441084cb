package guard

import (
	"context"
	"errors"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
)

// Notes writes the guard's deletion notes after the guard has answered. A
// note written before the answer held every allowed delete of a running
// runner for a create round trip: at 10,000 runners on a saturated API
// server a GitLab job end's DELETE took 393 to 664 ms at p99 against 65 to
// 98 ms without runnerguard. The watcher needs a note only when it records
// the death the delete causes, and waits for it up to death.NoteWait after
// it saw the deletion: a note is retried for that long after the answer.
// A note in flight is lost only with a replica that dies (a replica that is
// stopped writes what it holds first); the record then names no deleter.
type Notes struct {
	// Deleted, when set, reports whether the deletion a note tells of has
	// happened: a note is written only once it has, so a review the API
	// server did not send, of a pod nobody deletes, leaves none (and the
	// real note of a later deletion is not pre-empted by it). Nil: written
	// at once.
	Deleted func(context.Context, *v1alpha1.RunnerDeletion) (bool, error)
	writer  client.Writer
	// slots bounds the notes written at once; when they are all busy a
	// note gets one try before the answer, so memory stays bounded under
	// a burst and no review waits out the webhook's timeout.
	slots   chan struct{}
	mu      sync.Mutex
	pending sync.WaitGroup
	stopped bool
}

// NewNotes returns a Notes writing through w, up to inFlight at once.
func NewNotes(w client.Writer, inFlight int) *Notes {
	return &Notes{writer: w, slots: make(chan struct{}, inFlight)}
}

// Write writes n in the background; or tries once now, when every slot is
// busy or the replica is stopping (when the deletion must come first, n is
// then dropped: before the answer the deletion cannot have happened).
func (s *Notes) Write(ctx context.Context, n *v1alpha1.RunnerDeletion) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		s.now(ctx, n)
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
			s.write(logf.IntoContext(context.Background(), log), n)
		}()
	default:
		s.mu.Unlock()
		s.now(ctx, n)
	}
}

// now gives n its one try before the answer, or drops it when it must wait
// for the deletion.
func (s *Notes) now(ctx context.Context, n *v1alpha1.RunnerDeletion) {
	if s.Deleted != nil {
		s.failed(ctx, n, errors.New("every note slot is busy; a note is written only after the deletion, which follows the answer"))
		return
	}
	s.once(ctx, n)
}

// retryEvery is how often a note is tried again; the first try is at once.
const retryEvery = 200 * time.Millisecond

// write creates n, retrying for as long as the watcher waits for a note. A
// note of that name already there is this deletion's (the first admitted
// deletion of a pod UID is the one that ends its runner).
func (s *Notes) write(ctx context.Context, n *v1alpha1.RunnerDeletion) {
	ctx, cancel := context.WithTimeout(ctx, death.NoteWait)
	defer cancel()
	var last error
	happened := s.Deleted == nil
	if err := wait.PollUntilContextCancel(ctx, retryEvery, true, func(ctx context.Context) (bool, error) {
		if !happened {
			if happened, last = s.Deleted(ctx, n); !happened {
				return false, nil
			}
		}
		last = s.create(ctx, n)
		return last == nil, nil
	}); err != nil {
		if !happened && last == nil {
			// Refused, or not the API server's review: nothing to note,
			// and nothing failed.
			logf.FromContext(ctx).V(1).Info("no note: the pod was not deleted", "pod", n.Namespace+"/"+n.Deletion.Pod, "uid", n.Deletion.UID, "requester", n.Deletion.Requester)
			return
		}
		s.failed(ctx, n, last)
	}
}

// onceTimeout bounds the one try a note gets before the answer, well within
// the webhook's timeout (the chart's 5 s).
const onceTimeout = time.Second

// once tries n once, before the answer.
func (s *Notes) once(ctx context.Context, n *v1alpha1.RunnerDeletion) {
	ctx, cancel := context.WithTimeout(ctx, onceTimeout)
	defer cancel()
	if err := s.create(ctx, n); err != nil {
		s.failed(ctx, n, err)
	}
}

func (s *Notes) create(ctx context.Context, n *v1alpha1.RunnerDeletion) error {
	if err := s.writer.Create(ctx, n.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (s *Notes) failed(ctx context.Context, n *v1alpha1.RunnerDeletion, err error) {
	notesFailed.Inc()
	logf.FromContext(ctx).Error(err, "noting the deletion for the death record: its record will name no deleter",
		"pod", n.Namespace+"/"+n.Deletion.Pod, "uid", n.Deletion.UID)
}

// Start waits for the replica to stop, then for the notes in flight; the
// notes of reviews answered after that get their one try before the answer.
func (s *Notes) Start(ctx context.Context) error {
	<-ctx.Done()
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.pending.Wait()
	return nil
}

// NeedLeaderElection: every replica's guard answers, and writes notes.
func (s *Notes) NeedLeaderElection() bool { return false }
