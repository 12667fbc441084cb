package guard

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runnerguard/runnerguard/internal/podtest"
)

// heldReads is a reader whose reads of pods wait until release is closed,
// counting them.
func heldReads(t *testing.T, pods ...client.Object) (client.Reader, *atomic.Int32, chan struct{}) {
	t.Helper()
	release := make(chan struct{})
	var reads atomic.Int32
	c := interceptor.NewClient(fake.NewClientBuilder().WithObjects(pods...).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads.Add(1)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	return c, &reads, release
}

// A flood of reviews naming one pod costs one read while it is in flight,
// and each review gets a copy of its own.
func TestReviewsOfOnePodInFlightShareOneRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := podtest.Runner("ci", "big").Running("runner").Obj()
		r, reads, release := heldReads(t, pod)
		p := newPodReads(r)
		got := make(chan *corev1.Pod, 50)
		for range 50 {
			go func() {
				pod, err := p.get(context.Background(), client.ObjectKeyFromObject(pod))
				assert.NoError(t, err)
				got <- pod
			}()
		}
		synctest.Wait()
		assert.Equal(t, int32(1), reads.Load(), "one read for the reviews that arrived while it was in flight")
		close(release)
		first := <-got
		for range 49 {
			other := <-got
			assert.NotSame(t, first, other, "each review's own copy")
			assert.Equal(t, first, other)
		}
	})
}

// With every read slot taken, a review whose answer is due is told
// errReadsBusy (a refusal for now) rather than left waiting for the API
// server to give up; a slot that frees serves the next.
func TestAReviewThatCannotBeReadInTimeIsRefusedForNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var pods []client.Object
		for i := range readSlots + 1 {
			pods = append(pods, podtest.Runner("ci", fmt.Sprintf("r%d", i)).Obj())
		}
		r, reads, release := heldReads(t, pods...)
		p := newPodReads(r)
		for i := range readSlots {
			go func() { _, _ = p.get(context.Background(), client.ObjectKeyFromObject(pods[i])) }()
		}
		synctest.Wait()
		require.Equal(t, int32(readSlots), reads.Load())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := p.get(ctx, client.ObjectKeyFromObject(pods[readSlots]))
		assert.ErrorIs(t, err, errReadsBusy)
		assert.Equal(t, int32(readSlots), reads.Load(), "no read beyond the slots")
		close(release)
		synctest.Wait() // the reads in flight end, and give their slots back
		_, err = p.get(context.Background(), client.ObjectKeyFromObject(pods[readSlots]))
		assert.NoError(t, err)
	})
}

// A shared read is no one review's: the review that started it giving up
// does not cut it short for the others; a pod that is gone is told as
// gone.
func TestASharedReadOutlivesTheReviewThatStartedIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pod := podtest.Runner("ci", "r").Obj()
		r, _, release := heldReads(t, pod)
		p := newPodReads(r)
		gaveUp, cancel := context.WithCancel(context.Background())
		go func() { _, _ = p.get(gaveUp, client.ObjectKeyFromObject(pod)) }()
		synctest.Wait()
		done := make(chan error)
		go func() {
			_, err := p.get(context.Background(), client.ObjectKeyFromObject(pod))
			done <- err
		}()
		synctest.Wait()
		cancel()
		synctest.Wait()
		close(release)
		assert.NoError(t, <-done)
		_, err := p.get(context.Background(), types.NamespacedName{Namespace: "ci", Name: "gone"})
		assert.True(t, apierrors.IsNotFound(err), "%v", err)
	})
}
