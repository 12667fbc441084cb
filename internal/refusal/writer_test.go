package refusal

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

var podKey = types.NamespacedName{Namespace: "ci", Name: "r"}

// podClient holds one pod, its patches failing with a conflict the first
// conflicts times, as another replica's write would make them.
func podClient(t *testing.T, conflicts int32) (client.Client, *atomic.Int32) {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "r", UID: "u1", Annotations: map[string]string{"keep": "me"}}}
	var patches atomic.Int32
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).WithObjects(pod).Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if patches.Add(1) <= conflicts {
				return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, obj.GetName(), nil)
			}
			return c.Patch(ctx, obj, p, opts...)
		},
	})
	return c, &patches
}

func storedOn(t *testing.T, c client.Client) (map[string]string, *v1alpha1.Refusals) {
	t.Helper()
	pod := &corev1.Pod{}
	require.NoError(t, c.Get(context.Background(), podKey, pod))
	l, err := FromPod(pod.Annotations)
	require.NoError(t, err)
	return pod.Annotations, l
}

func TestTheWriterKeepsEachRequesterWithItsCountOnThePod(t *testing.T) {
	c, _ := podClient(t, 0)
	w := NewWriter(c, c)
	ctx := context.Background()
	w.Note(ctx, podKey, "u1", one("reaper", "delete", "busy", 1))
	w.Note(ctx, podKey, "u1", one("reaper", "delete", "busy", 2))
	w.Note(ctx, podKey, "u1", one("alice", "eviction", "busy", 3))

	ann, l := storedOn(t, c)
	require.NotNil(t, l)
	assert.Equal(t, "me", ann["keep"], "the pod's other annotations stay")
	assert.Equal(t, formatted(t, entries(entry("reaper", "delete", "busy", 1, 2, 2), entry("alice", "eviction", "busy", 3, 3, 1))), formatted(t, *l))

	w.Note(ctx, podKey, "u1", one("reaper", "delete", "busy", 9))

	_, l = storedOn(t, c)
	assert.Equal(t, int32(3), l.Entries[0].Count, "a later refusal adds to what is stored")
}

func TestAWriteThatConflictsIsMergedAgain(t *testing.T) {
	c, patches := podClient(t, 2)
	w := NewWriter(c, c)
	w.Note(context.Background(), podKey, "u1", one("reaper", "delete", "busy", 1))

	_, l := storedOn(t, c)
	require.NotNil(t, l)
	assert.Equal(t, int32(1), l.Entries[0].Count)
	assert.Equal(t, int32(3), patches.Load())
}

func TestNothingIsWrittenOnAnotherPodOfTheName(t *testing.T) {
	c, patches := podClient(t, 0)
	w := NewWriter(c, c)
	w.Note(context.Background(), podKey, "u0", one("reaper", "delete", "busy", 1))
	w.Note(context.Background(), types.NamespacedName{Namespace: "ci", Name: "gone"}, "u2", one("reaper", "delete", "busy", 1))

	_, l := storedOn(t, c)
	assert.Nil(t, l)
	assert.Zero(t, patches.Load())
}

func TestAStoredValueThatDoesNotParseIsReplacedAndToldLost(t *testing.T) {
	c, _ := podClient(t, 0)
	pod := &corev1.Pod{}
	require.NoError(t, c.Get(context.Background(), podKey, pod))
	pod.Annotations[Annotation] = "forged"
	require.NoError(t, c.Update(context.Background(), pod))
	w := NewWriter(c, c)
	w.Note(context.Background(), podKey, "u1", one("reaper", "delete", "busy", 1))

	_, l := storedOn(t, c)
	require.NotNil(t, l)
	assert.Equal(t, int32(1), l.Dropped)
	assert.Equal(t, "reaper", l.Entries[0].By)
}

func TestANilWriterNotesNothing(t *testing.T) {
	var w *Writer
	w.Note(context.Background(), podKey, "u1", one("reaper", "delete", "busy", 1))

}

// churnClient holds one pod whose other fields change before each of the
// writer's patches, as a reaper patching the pod it was refused on does
// (50 a second in the security review): the pod's resourceVersion is
// never the one the writer read.
func churnClient(t *testing.T) (client.Client, *atomic.Int32) {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "r", UID: "u1", Annotations: map[string]string{"keep": "me"}}}
	var patches atomic.Int32
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).WithObjects(pod).Build(), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			n := patches.Add(1)
			churn := &corev1.Pod{}
			require.NoError(t, c.Get(ctx, podKey, churn))
			churn.Labels = map[string]string{"churn": fmt.Sprint(n)}
			require.NoError(t, c.Update(ctx, churn))
			return c.Patch(ctx, obj, p, opts...)
		},
	})
	return c, &patches
}

// A reaper cannot keep its refusals off the pod by changing the pod:
// the write holds while the refusals are as read, whatever else changed.
func TestARefusalIsKeptWhateverElseChangesOnThePod(t *testing.T) {
	c, patches := churnClient(t)
	w := NewWriter(c, c)
	for i := range 8 {
		w.Note(context.Background(), podKey, "u1", one("reaper", "delete", "busy", i+1))

	}
	_, l := storedOn(t, c)
	require.NotNil(t, l)
	assert.Equal(t, int32(8), l.Entries[0].Count, "every refusal kept")
	assert.Equal(t, int32(8), patches.Load(), "each with one write")
}

// Two replicas writing the refusals of one pod: the second's write, made
// from a read the first's changed, fails its test and merges again.
func TestARefusalWrittenMeanwhileByAnotherReplicaIsMergedNotLost(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "r", UID: "u1", Annotations: map[string]string{"keep": "me"}}}
	base := fake.NewClientBuilder().WithScheme(s).WithObjects(pod).Build()
	other := NewWriter(base, base)
	var once atomic.Bool
	c := interceptor.NewClient(base, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if once.CompareAndSwap(false, true) {
				other.Note(ctx, podKey, "u1", one("alice", "eviction", "busy", 1))

			}
			return asTheAPIServer(c.Patch(ctx, obj, p, opts...))
		},
	})
	w := NewWriter(c, c)
	w.Note(context.Background(), podKey, "u1", one("reaper", "delete", "busy", 2))

	_, l := storedOn(t, c)
	require.NotNil(t, l)
	got := map[string]int32{}
	for _, e := range l.Entries {
		got[e.By] = e.Count
	}
	assert.Equal(t, map[string]int32{"alice": 1, "reaper": 1}, got)
}

// asTheAPIServer answers a JSON patch that does not apply (a failed test)
// as kube-apiserver does: 422, whatever the patch library said
// (k8s.io/apiserver's patch handler, NewGenericServerResponse). The fake
// client returns the library's error itself.
func asTheAPIServer(err error) error {
	if _, ok := err.(apierrors.APIStatus); err == nil || ok {
		return err
	}
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
}

// later runs work after delay on its own goroutine, as the guard's pool
// does, and counts what it runs.
type later struct {
	wg   sync.WaitGroup
	runs atomic.Int32
}

func (l *later) run(ctx context.Context, delay time.Duration, work func(context.Context)) {
	l.wg.Add(1)
	time.AfterFunc(delay, func() {
		defer l.wg.Done()
		l.runs.Add(1)
		work(ctx)
	})
}

// With Later, a reaper's refusals that come one after another are held
// until they settle and written in one patch, so its retries do not
// review a pod the writes keep changing; later ones are held in turn.
func TestRefusalsThatComeInARunAreWrittenOnceTheySettle(t *testing.T) {
	c, patches := podClient(t, 0)
	w := NewWriter(c, c)
	var l later
	w.Later, w.Settle, w.MaxHold = l.run, 50*time.Millisecond, time.Minute
	ctx := context.Background()
	for i := range 5 {
		w.Note(ctx, podKey, "u1", one("reaper", "delete", "busy", i+1))
		time.Sleep(10 * time.Millisecond)
	}
	_, stored := storedOn(t, c)
	assert.Nil(t, stored, "held while they keep coming")
	l.wg.Wait()
	_, stored = storedOn(t, c)
	require.NotNil(t, stored)
	assert.Equal(t, int32(5), stored.Entries[0].Count)
	assert.Equal(t, int32(1), patches.Load(), "one write for the run")

	w.Note(ctx, podKey, "u1", one("alice", "eviction", "busy", 9))
	l.wg.Wait()
	_, stored = storedOn(t, c)
	assert.Len(t, stored.Entries, 2, "a later refusal is written in turn")
	assert.Equal(t, int32(2), patches.Load())
	assert.Empty(t, w.pending, "nothing held once written")
}

// A reaper that never pauses still has its refusals written, MaxHold
// after the first held.
func TestRefusalsThatNeverSettleAreWrittenAfterMaxHold(t *testing.T) {
	c, patches := podClient(t, 0)
	w := NewWriter(c, c)
	var l later
	w.Later, w.Settle, w.MaxHold = l.run, 40*time.Millisecond, 120*time.Millisecond
	ctx := context.Background()
	deadline := time.Now().Add(400 * time.Millisecond)
	n := int32(0)
	for time.Now().Before(deadline) {
		n++
		w.Note(ctx, podKey, "u1", one("reaper", "delete", "busy", int(n)))
		time.Sleep(10 * time.Millisecond)
	}
	l.wg.Wait()
	_, stored := storedOn(t, c)
	require.NotNil(t, stored)
	assert.Equal(t, n, stored.Entries[0].Count, "every refusal kept")
	assert.GreaterOrEqual(t, patches.Load(), int32(2), "written while they kept coming")
	assert.Less(t, patches.Load(), n/2, "far fewer writes than refusals")
}
