package guard

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/webhook/death"
)

// Notes writes the guard's deletion notes after the guard has answered. A
// note written before the answer held every allowed delete of a running
// runner for a create round trip: at 10,000 runners on a saturated API
// server a GitLab job end's DELETE took 393 to 664 ms at p99 against 65 to
// 98 ms without runnerguard. The watcher needs a note only when it records
// the death the delete causes, and waits up to death.NoteWait after the
// deletion for it: a note written in the background is retried until then.
// A note in flight is lost only with a replica that dies (a replica that is
// stopped writes what it holds first); the record then names no deleter.
type Notes struct {
	Writer client.Writer
	// InFlight bounds the notes written at once; when they are all busy
	// the answer waits for its note, so memory stays bounded under a burst.
	InFlight int

	mu      sync.Mutex
	slots   chan struct{}
	pending sync.WaitGroup
	stopped bool
}

// NewNotes returns a Notes writing through w, up to inFlight at once.
func NewNotes(w client.Writer, inFlight int) *Notes {
	return &Notes{Writer: w, InFlight: inFlight, slots: make(chan struct{}, inFlight)}
}

// Write writes n in the background, or now when every slot is busy or the
// replica is stopping.
func (s *Notes) Write(ctx context.Context, n *v1alpha1.RunnerDeletion) {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		s.write(ctx, n)
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
		s.write(ctx, n)
	}
}

// write creates n, retrying for as long as the watcher waits for a note. A
// note of that name already there is this deletion's (the first admitted
// deletion of a pod UID is the one that ends its runner).
func (s *Notes) write(ctx context.Context, n *v1alpha1.RunnerDeletion) {
	ctx, cancel := context.WithTimeout(ctx, death.NoteWait)
	defer cancel()
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 50 * time.Millisecond, Factor: 2, Steps: 8, Cap: time.Second},
		func(ctx context.Context) (bool, error) {
			last = s.Writer.Create(ctx, n.DeepCopy())
			return last == nil || apierrors.IsAlreadyExists(last), nil
		})
	if err != nil {
		notesFailed.Inc()
		logf.FromContext(ctx).Error(last, "noting the deletion for the death record: its record will name no deleter",
			"pod", n.Namespace+"/"+n.Deletion.Pod, "uid", n.Deletion.UID)
	}
}

// Start waits for the replica to stop, then for the notes in flight; the
// notes of reviews answered after that are written before their answers.
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
