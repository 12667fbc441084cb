package deletion

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// Notes writes the guard's deletion notes. The guard calls it after it
// has answered, on its bounded pool of work after its answers (the
// guard's after.go): a note written before the answer would hold every
// allowed delete of a running runner for a create round trip through the
// API server, which is slowest exactly when the fleet is busiest. The
// recorder needs a note only when it records the death the delete causes,
// and waits for it up to NoteWait after it saw the deletion: a note is
// retried for that long.
// A note in flight is lost only with a replica that dies (a replica that is
// stopped finishes the guard's work after its answers first); the record
// then names no deleter.
type Notes struct {
	writer client.Writer
	// failed counts the notes not written while the recorder waited.
	failed prometheus.Counter
}

// NewNotes returns a Notes writing through w, counting on failed the notes
// it could not write in time.
func NewNotes(w client.Writer, failed prometheus.Counter) *Notes {
	return &Notes{writer: w, failed: failed}
}

// Write writes n in the caller's turn, once ready (nil: at once), called
// first, reports true: the review's object shows what the note says
// happened. The note has its own time, apart from ctx's deadline: ready's
// wait, then NoteWait of retries.
func (s *Notes) Write(ctx context.Context, n *v1alpha1.RunnerDeletion, ready func(context.Context) bool) {
	ctx = context.WithoutCancel(ctx)
	if ready != nil && !ready(ctx) {
		logf.FromContext(ctx).Info("no note: the reviewed object does not show the deletion",
			"object", n.Namespace+"/"+n.Deletion.Pod, "uid", n.Deletion.UID)
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

// RetryEvery is how often a note is tried again, and a deletion looked for
// before one; the first try is at once.
const RetryEvery = 200 * time.Millisecond

// create creates n. A note of that name already there is this deletion's
// (the first admitted deletion of a pod UID is the one that ends its
// runner).
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
