//go:build scale

package scale

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// seenRecord is a RunnerDeath as the observer saw it arrive.
type seenRecord struct {
	name, class, deletedBy, rule string
	at                           time.Time
}

// observer watches the fleet's pods and runnerguard's records, and keeps
// when each runner died (its first terminated state or its removal, as
// the watch delivered it) and when each record arrived: the record
// latency, measured on one clock with millisecond resolution.
type observer struct {
	mu      sync.Mutex
	died    map[types.UID]time.Time
	records map[types.UID][]seenRecord
	// deleting and removed: when a pod's deletion was first seen and when
	// the pod went, for the report on records without their deleter.
	deleting, removed map[types.UID]time.Time
	// startFirst and startLast: deletion.Start of a pod as its
	// deletion was first seen and as its removal carried it.
	startFirst, startLast map[types.UID]time.Time
	// restarted: pods seen with a container restarted in place.
	restarted map[types.UID]time.Time
	// running, held and released: when a pod was first seen running, first
	// seen with the budget label (its marks come in the same patch), and
	// first seen without it after that: the marks' delay behind the job.
	running, held, released map[types.UID]time.Time
}

// first keeps the first time uid is seen in m.
func (o *observer) first(m map[types.UID]time.Time, uid types.UID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := m[uid]; !ok {
		m[uid] = time.Now()
	}
}

// runnerEnded: any regular container of pod is terminated.
func runnerEnded(pod *corev1.Pod) bool {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Terminated != nil {
			return true
		}
	}
	return false
}

// start keeps pod's deletion.Start in m (replacing any earlier one
// when last).
func (o *observer) start(m map[types.UID]time.Time, pod *corev1.Pod, last bool) {
	at, ok := deletion.Start(pod)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, seen := m[pod.UID]; last || !seen {
		m[pod.UID] = at
	}
}

// marks keeps when pod was first seen running, held by the namespace's
// budget, and released from it.
func (o *observer) marks(pod *corev1.Pod) {
	if pod.Status.Phase == corev1.PodRunning {
		o.first(o.running, pod.UID)
	}
	if pod.Labels[runnerpod.BudgetLabel] == recorder.BudgetHeld {
		o.first(o.held, pod.UID)
		return
	}
	o.mu.Lock()
	_, wasHeld := o.held[pod.UID]
	o.mu.Unlock()
	if wasHeld {
		o.first(o.released, pod.UID)
	}
}

// markDelays are the delays from a job's start (its pod seen running) to
// its budget label, and from its death (seen) to the label's removal,
// sorted; and how many runners among rs were held, and released.
func (o *observer) markDelays(rs []*runner) (on, off []time.Duration, held, released int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range rs {
		h, ok := o.held[r.uid]
		if !ok {
			continue
		}
		held++
		if run, ok := o.running[r.uid]; ok {
			on = append(on, h.Sub(run))
		}
		if rel, ok := o.released[r.uid]; ok {
			released++
			if died, ok := o.died[r.uid]; ok && !rel.Before(died) {
				off = append(off, rel.Sub(died))
			}
		}
	}
	return sorted(on), sorted(off), held, released
}

// startObserver starts the watches and waits for their first lists.
func startObserver(ctx context.Context, cfg *rest.Config) (*observer, error) {
	o := &observer{died: map[types.UID]time.Time{}, records: map[types.UID][]seenRecord{},
		deleting: map[types.UID]time.Time{}, removed: map[types.UID]time.Time{},
		startFirst: map[types.UID]time.Time{}, startLast: map[types.UID]time.Time{}, restarted: map[types.UID]time.Time{},
		running: map[types.UID]time.Time{}, held: map[types.UID]time.Time{}, released: map[types.UID]time.Time{}}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme.Scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: labels.SelectorFromSet(labels.Set{fleetLabel: "1"})},
	}})
	if err != nil {
		return nil, err
	}
	pods, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	onPod := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if ok && runnerEnded(pod) {
			o.first(o.died, pod.UID)
		}
		if ok {
			o.marks(pod)
		}
		if ok && len(pod.Status.ContainerStatuses) > 0 && pod.Status.ContainerStatuses[0].RestartCount > 0 {
			o.first(o.restarted, pod.UID)
		}
		if ok && pod.DeletionTimestamp != nil {
			o.first(o.deleting, pod.UID)
			o.start(o.startFirst, pod, false)
		}
	}
	if _, err := pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: onPod, UpdateFunc: func(_, obj any) { onPod(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				o.first(o.died, pod.UID)
				o.first(o.deleting, pod.UID)
				o.first(o.removed, pod.UID)
				o.start(o.startFirst, pod, false)
				o.start(o.startLast, pod, true)
			}
		},
	}); err != nil {
		return nil, err
	}
	recs, err := c.GetInformer(ctx, &v1alpha1.RunnerDeath{})
	if err != nil {
		return nil, err
	}
	if _, err := recs.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		rd, ok := obj.(*v1alpha1.RunnerDeath)
		if !ok {
			return
		}
		uid := types.UID(rd.Labels[death.PodUIDLabel])
		o.mu.Lock()
		o.records[uid] = append(o.records[uid], seenRecord{name: rd.Name, class: rd.Record.Class, deletedBy: rd.Record.DeletedBy, rule: rd.Record.DeleteRule, at: time.Now()})
		o.mu.Unlock()
	}}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, ctx.Err()
	}
	return o, nil
}

// recorded counts the runners among rs with at least one record.
func (o *observer) recorded(rs []*runner) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range rs {
		if len(o.records[r.uid]) > 0 {
			n++
		}
	}
	return n
}

// restartedIn counts the runners among rs seen restarted in place.
func (o *observer) restartedIn(rs []*runner) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range rs {
		if _, ok := o.restarted[r.uid]; ok {
			n++
		}
	}
	return n
}

// recordsOf counts the records of the runners among rs.
func (o *observer) recordsOf(rs []*runner) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range rs {
		n += len(o.records[r.uid])
	}
	return n
}

// ended counts the runners among rs whose death the observer saw.
func (o *observer) ended(rs []*runner) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range rs {
		if _, ok := o.died[r.uid]; ok {
			n++
		}
	}
	return n
}
