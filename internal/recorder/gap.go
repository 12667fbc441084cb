package recorder

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Gap keeps, on every replica, the final states of the runner pods removed
// in the last while, so that a replica that comes to lead records the pods
// removed while no replica led (a leader's crash, a rollout of runnerguard):
// the new leader's cache lists only the pods that still exist.
//
// It watches runner pods without a store: followers keep no pod but those
// removed within Keep, at most Max of them, compacted as the leader's cache
// compacts its own. Once its replica leads, it hands what it holds, and every
// removal after, to the watcher, and holds nothing more. A removal the old
// leader had already recorded is planned again and finds its record by its
// name (AlreadyExists): a death's record is named after the death.
//
// What it cannot see: a removal while its own watch was too far behind to
// resume (the API server answered 410 Gone) and it listed again. A replica
// that was not running at the removal holds nothing of it either.
type Gap struct {
	pods corev1client.PodsGetter
	// keep is how long a removal is held: as long as a lease can outlive
	// its leader, and then some (GapKeep).
	keep time.Duration
	max  int
	now  func() time.Time

	// watched is set once the first watch of removals is established:
	// until then the replica holds nothing of a removal, so it is not ready
	// (Watched), and a rollout does not stop the old replica for it yet.
	watched atomic.Bool

	mu      sync.Mutex
	compact func(any) (any, error)
	names   []string
	// held are the removals, oldest first.
	held []heldPod
	// sink takes every removal once the replica leads, until the leader's
	// own cache has synced (synced) and keep has passed since: from then on
	// the leader's cache sees every removal itself.
	sink   func(*corev1.Pod, time.Time)
	synced func() bool
	stopAt time.Time
	// recent are the UIDs of the removals of the last two holds, oldest
	// first, on every replica: retention on the leader spares their
	// records, which the next leader may plan again (Recent).
	recent []recentUID
}

type recentUID struct {
	uid types.UID
	at  time.Time
}

type heldPod struct {
	pod *cachedPod
	at  time.Time
}

// GapKeep is how long a removal must be held for the next leader: a lease
// is taken over at most its duration and a retry after its holder's last
// renewal, which came before the holder's end. The renew deadline on top is
// a margin for a leader that saw a removal and ended while its record
// waited (for the guard's note), and for clocks that step.
func GapKeep(leaseDuration, renewDeadline, retryPeriod time.Duration) time.Duration {
	return leaseDuration + renewDeadline + retryPeriod
}

// NewGap returns a Gap of the runner pods pods lists, holding a removal
// for keep, and at most max of them.
func NewGap(pods corev1client.PodsGetter, keep time.Duration, max int, now func() time.Time) *Gap {
	return &Gap{pods: pods, keep: keep, max: max, now: now, compact: compact}
}

// configure makes the gap hold what the watcher's cache keeps of a pod, and
// only pods with a container among names. Before Start.
func (g *Gap) configure(c compactor, names []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.compact, g.names = c.compact, names
}

// NeedLeaderElection: every replica holds the removals; the one that comes
// to lead uses them.
func (g *Gap) NeedLeaderElection() bool { return false }

// Start watches runner pods until ctx ends (a manager.Runnable).
func (g *Gap) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("gap")
	selector := runnerpod.Labelled().String()
	lw := &toolscache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return g.pods.Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Cap: time.Minute, Steps: 1 << 30}
	}
	backoff := newBackoff()
	for ctx.Err() == nil {
		began := time.Now()
		err := g.watch(ctx, selector, lw)
		if ctx.Err() != nil {
			break
		}
		if time.Since(began) > time.Minute {
			// A watch that ran a while before it fell behind starts over
			// at once: every wait is a while no removal is seen.
			backoff = newBackoff()
		}
		log.Info("watching runner pod removals again", "reason", err)
		select {
		case <-ctx.Done():
		case <-time.After(backoff.Step()):
		}
	}
	return nil
}

// watch follows removals from now on, until the watch can no longer resume.
func (g *Gap) watch(ctx context.Context, selector string, lw toolscache.WatcherWithContext) error {
	// One pod's worth of list: the list's resource version is the
	// collection's, and the pods themselves are not kept.
	l, err := g.pods.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 1})
	if err != nil {
		return err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, l.ResourceVersion, lw)
	if err != nil {
		return err
	}
	defer w.Stop()
	g.watched.Store(true)
	for e := range w.ResultChan() {
		switch e.Type {
		case watch.Deleted:
			if pod, ok := e.Object.(*corev1.Pod); ok {
				g.removed(pod)
			}
		case watch.Error:
			// The watch ends after it (410 Gone: too far behind).
			err = apierrors.FromObject(e.Object)
		}
	}
	if err == nil {
		err = errors.New("the watch ended")
	}
	return err
}

// Watched is a readiness check: an error until the replica has begun to
// watch runner pod removals, so that it holds the removals a rollout's or
// a crash's gap in leadership would otherwise lose.
func (g *Gap) Watched(*http.Request) error {
	if !g.watched.Load() {
		return errors.New("not yet watching runner pod removals")
	}
	return nil
}

// removed holds pod's final state, or hands it on once the replica leads.
func (g *Gap) removed(pod *corev1.Pod) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return slices.Contains(g.names, c.Name) }) {
		return
	}
	obj, err := g.compact(pod)
	if err != nil {
		return
	}
	c, ok := obj.(*cachedPod)
	if !ok {
		return
	}
	now := g.now()
	g.remember(c.UID, now)
	if g.sink != nil {
		if g.stopAt.IsZero() && g.synced() {
			g.stopAt = now.Add(g.keep)
		}
		if g.stopAt.IsZero() || now.Before(g.stopAt) {
			g.sink(c.pod(), now)
		}
		return
	}
	g.expire(now)
	if len(g.held) >= g.max {
		g.held[0] = heldPod{} // no reference kept by the array
		g.held = g.held[1:]
		gapDropped.Inc()
	}
	g.held = append(g.held, heldPod{pod: c, at: now})
}

// remember keeps uid among the recent removals, for two holds and at most
// twice as many as the gap holds.
func (g *Gap) remember(uid types.UID, now time.Time) {
	i := 0
	for i < len(g.recent) && (now.Sub(g.recent[i].at) > 2*g.keep || len(g.recent)-i >= 2*g.max) {
		i++
	}
	if i > 0 {
		g.recent = slices.Clone(g.recent[i:])
	}
	g.recent = append(g.recent, recentUID{uid: uid, at: now})
}

// Recent is the UIDs of the runner pods removed within two holds: a
// replica that comes to lead may plan their deaths again, and a record
// that retention removed in between would be written a second time. Twice
// the hold: the replicas see a removal at their watches' own pace.
func (g *Gap) Recent() map[types.UID]bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	out := make(map[types.UID]bool, len(g.recent))
	for _, r := range g.recent {
		if now.Sub(r.at) <= 2*g.keep {
			out[r.uid] = true
		}
	}
	return out
}

// expire drops what was removed more than keep ago.
func (g *Gap) expire(now time.Time) {
	i := 0
	for i < len(g.held) && now.Sub(g.held[i].at) > g.keep {
		i++
	}
	if i > 0 {
		g.held = slices.Clone(g.held[i:])
	}
}

// handTo hands sink what is held, then every removal as it comes until
// keep after synced reports true: the replica leads, and nothing it hands
// on expires any more. The gap's watch and the leader's cache each see a
// removal at their own pace: for a while, the watcher is handed the
// removals its cache saw too, and keeps one of each.
func (g *Gap) handTo(sink func(*corev1.Pod, time.Time), synced func() bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.expire(g.now())
	for _, h := range g.held {
		sink(h.pod.pod(), h.at)
	}
	g.held, g.sink, g.synced = nil, sink, synced
}
