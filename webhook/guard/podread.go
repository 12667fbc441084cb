package guard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The reviews that bring no pod (an eviction, a connection) read it from
// the API server, uncached, since its state decides. Anyone on the pod
// network can post such reviews, each naming a large pod, and queue the
// reads until a real review's read outlasts the API server's wait, which
// would then apply the failure policy (Ignore for connections) and let a
// reaper's exec into a busy runner through. So the reads are shared and
// bounded: reviews of one pod that arrive while its read is in flight
// share that read; at most readSlots reads are in flight; and a review
// whose read does not finish in time (the answer's deadline, Serve) is
// refused for now rather than left to time out.

// readSlots bounds the guard's pod reads in flight on one replica, and
// with it the memory they hold: a flood's pods can be a megabyte each,
// decoded to several, under the server's soft memory limit (a quarter of
// its container's), where more reads at once would have the collector run
// without end and every answer wait;
// slotWait bounds a review's wait for one, so that a flood of reviews of
// many pods is refused for now and gives back its path's budget at once
// rather than holding it while it waits; readTimeout bounds one read.
const (
	readSlots   = 8
	slotWait    = time.Second
	readTimeout = 5 * time.Second
)

// errReadsBusy: the pod could not be read before the answer was due.
var errReadsBusy = errors.New("runnerguard is reading too many pods to read this one in time; retry")

// podReads reads pods for the reviews that bring none.
type podReads struct {
	reader client.Reader
	shared singleflight.Group
	slots  chan struct{}
}

func newPodReads(r client.Reader) *podReads {
	return &podReads{reader: r, slots: make(chan struct{}, readSlots)}
}

// get reads the pod key as the API server has it now, sharing a read in
// flight, or fails with ctx (errReadsBusy when its deadline passed) or
// with the read's own error (a not-found among them). The pod returned is
// the caller's own, slim as a review's pod is decoded (decode.go).
func (p *podReads) get(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	// The shared read is no one review's: it runs in a context of its own,
	// which no poster's deadline or disconnection cuts short, and each
	// review waits for it only as long as its own answer allows.
	ch := p.shared.DoChan(key.String(), func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), readTimeout)
		defer cancel()
		return p.read(rctx, key)
	})
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", errReadsBusy, ctx.Err())
	case r := <-ch:
		switch {
		case r.Err == nil:
		case ctx.Err() != nil:
			return nil, fmt.Errorf("%w: %w", errReadsBusy, r.Err)
		case errors.Is(r.Err, errNoSlot) || errors.Is(r.Err, context.DeadlineExceeded):
			return nil, fmt.Errorf("%w: %w", errReadsBusy, r.Err)
		default:
			return nil, r.Err
		}
		// Each review gets its own copy of the slim pod: a flood that
		// shares one read copies only what a rule reads.
		return r.Val.(*corev1.Pod).DeepCopy(), nil
	}
}

// errNoSlot: every read slot stayed taken for slotWait.
var errNoSlot = errors.New("no read slot free")

// read takes a slot, waiting no longer than slotWait, and reads the pod.
func (p *podReads) read(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	wait := time.NewTimer(slotWait)
	defer wait.Stop()
	select {
	case p.slots <- struct{}{}:
	case <-wait.C:
		return nil, errNoSlot
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-p.slots }()
	pod := &corev1.Pod{}
	if err := p.reader.Get(ctx, key, pod); err != nil {
		return nil, err
	}
	return slim(pod), nil
}

// readPod reads the pod key for a review that brings none (podReads).
func (h Readers) readPod(ctx context.Context, key types.NamespacedName) (*corev1.Pod, error) {
	return h.live.get(ctx, key)
}
