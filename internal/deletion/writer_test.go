package deletion

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// notesClient stores notes, failing the first failures creates.
func notesClient(t *testing.T, failures int32) (client.WithWatch, *atomic.Int32) {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(s))
	var calls atomic.Int32
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).Build(), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if calls.Add(1) <= failures {
				return errors.New("etcdserver: request timed out")
			}
			return c.Create(ctx, obj, opts...)
		},
	})
	return c, &calls
}

// notesFailed stands for the guard's counter of notes not written.
var notesFailed = prometheus.NewCounter(prometheus.CounterOpts{Name: "test_notes_failed_total"})

func testNote(name string) *v1alpha1.RunnerDeletion {
	return &v1alpha1.RunnerDeletion{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: name},
		Deletion: v1alpha1.DeletionNote{Pod: "r", UID: name, Requester: "alice", Operation: "delete", Rule: "override", Time: metav1.Now()}}
}

func noted(t *testing.T, c client.Client, name string) bool {
	t.Helper()
	err := c.Get(context.Background(), client.ObjectKey{Namespace: "ci", Name: name}, &v1alpha1.RunnerDeletion{})
	return err == nil
}

func TestANoteIsRetriedPastTheAPIServersFailures(t *testing.T) {
	// Ten failures at one try per retryEvery: an outage of 2 s, more than
	// a capped exponential backoff would have waited.
	c, calls := notesClient(t, 10)
	NewNotes(c, notesFailed).Write(context.Background(), testNote("u1"), nil)
	assert.True(t, noted(t, c, "u1"))
	assert.Equal(t, int32(11), calls.Load())
}

func TestANoteOutlivesItsCallersDeadline(t *testing.T) {
	c, _ := notesClient(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the work after the answer timed out
	NewNotes(c, notesFailed).Write(ctx, testNote("u1"), nil)
	assert.True(t, noted(t, c, "u1"), "retried on its own time")
}

func TestANoteThatCannotBeWrittenWhileTheWatcherWaitsIsCounted(t *testing.T) {
	c, _ := notesClient(t, 1<<30)
	before := testutil.ToFloat64(notesFailed)
	NewNotes(c, notesFailed).Write(context.Background(), testNote("u1"), nil)
	assert.False(t, noted(t, c, "u1"))
	assert.Equal(t, before+1, testutil.ToFloat64(notesFailed))
}

func TestANoteWaitsForWhatItTellsOf(t *testing.T) {
	c, _ := notesClient(t, 0)
	var happened atomic.Bool
	// ready polls, as the guard's does, for a bounded time.
	ready := func(ctx context.Context) bool {
		ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		return wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
			return happened.Load(), nil
		}) == nil
	}
	n := NewNotes(c, notesFailed)
	failed := testutil.ToFloat64(notesFailed)
	n.Write(context.Background(), testNote("u1"), func(ctx context.Context) bool {
		// Never before what it tells of: the test lets it happen only now.
		assert.False(t, noted(t, c, "u1"))
		happened.Store(true)
		return ready(ctx)
	})
	assert.True(t, noted(t, c, "u1"), "once the deletion happened")

	// What never happens (a review of a pod nobody deletes) leaves no note,
	// and nothing failed.
	happened.Store(false)
	n.Write(context.Background(), testNote("u2"), ready)
	assert.False(t, noted(t, c, "u2"))
	assert.Equal(t, failed, testutil.ToFloat64(notesFailed))
}
