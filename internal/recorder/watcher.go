package recorder

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Watcher records runner deaths as the kubelet reports them: the one
// writer of RunnerDeath objects.
type Watcher struct {
	// Pods is the cache of runner pods the watcher records from.
	Pods *PodCache
	// Gap, when set, holds on every replica the runner pods removed while
	// no replica led; the watcher plans them once its replica leads.
	Gap *Gap
	// Client reads namespaces and the guard's deletion notes from the
	// manager's cache, and writes RunnerDeaths.
	Client client.Client
	// Jobs is the job each EphemeralRunner named, as the marker's watch
	// saw it (Marker.Jobs); nil when none is kept.
	Jobs *LastJobs
	// Evictions is the eviction request the leader's responder let each
	// pod go on (Responder.Answered); nil where the API server has none.
	Evictions *Answered
	// Reader reads uncached what a death record adds when it is written
	// (the owning EphemeralRunner, the node); the manager's API reader
	// when left nil.
	Reader client.Reader
	// Recorder writes the Events that notify each death and stuck runner.
	Recorder events.EventRecorder
	Config   config.Config
	// Namespaces selects the opted-in namespaces by their labels.
	Namespaces labels.Selector
	// Modes says which namespaces the registrations select as enforce: a
	// note of warn mode's admitted delete there is not the API server's.
	// nil: none is.
	Modes *Modes
	// StuckAfter is how long a runner may wait to start before it is
	// reported stuck.
	StuckAfter time.Duration
	Now        func() time.Time
	// StallReports tells stalls on the jobs' commits; nil: one is made
	// from Config.Reports when they report to GitHub or GitLab, with
	// Senders (nil: its own).
	StallReports StallReporter
	// Senders tell each report destination (notify.Senders), shared with
	// the reporter and JobsOver, so that one GitHub App installation token
	// serves them all.
	Senders map[string]notify.Sender
	// Views keeps the fleets' own accounts of their jobs on the records;
	// nil: one is made with the manager's reader and client.
	Views *Views

	mu sync.Mutex
	// stuck holds the waiting reason of each stuck runner's pod.
	stuck map[types.NamespacedName]string
	// gone keeps the last state of pods the cache has dropped, and when,
	// until their deaths are planned: a death reported just before the
	// kubelet's final delete, or a pod removed while its runner ran. More
	// than one pod of a name can wait: a pod recreated under its name.
	gone map[types.NamespacedName][]gonePod
	// seen spares the API server a create per resync of a recorded death.
	seen *SeenSet
	// nodes spares the API server a node read per death of a drain.
	nodes nodeMemo
	// stalls are the runner pods stalled at their memory limit.
	stalls stallNotes
}

// recordWorkers is how many pods the watcher reconciles at once.
const recordWorkers = 4

// markWorkers is how many pods the marker reconciles at once. Each change
// is a pod patch's round trip: with one worker, a fleet's burst of job
// starts waited minutes for its marks and budget label (10,000 runners,
// docs/performance/fleet-scale.md). The queue never hands one pod to two
// workers at once.
const markWorkers = 8

// SetupWithManager runs the watcher, leader-elected, on its cache of runner
// pods (which it adds to mgr) and mgr's cache of the guard's deletion notes.
func (w *Watcher) SetupWithManager(mgr ctrl.Manager) error {
	if w.Reader == nil {
		w.Reader = mgr.GetAPIReader()
	}
	jobLabels, jobAnnotations := runnerpod.JobPodKeys(w.Config.Presets)
	if err := w.Pods.KeepJobKeys(jobLabels, jobAnnotations); err != nil {
		return err
	}
	if err := mgr.Add(w.Pods); err != nil {
		return err
	}
	names := w.Config.RunnerContainerNames()
	hasRunner := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*cachedPod)
		return ok && slices.ContainsFunc(pod.containers, func(c string) bool { return runnerpod.IsRunnerContainer(names, c) })
	})
	w.stuck = map[types.NamespacedName]string{}
	w.gone = map[types.NamespacedName][]gonePod{}
	w.seen = NewSeenSet(4096)
	if err := w.setupFollowers(mgr); err != nil {
		return err
	}
	pods := w.podEvents()
	// A note reaching the cache after its pod's update brings the pod back.
	notes := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		n, ok := o.(*v1alpha1.RunnerDeletion)
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: n.Namespace, Name: n.Deletion.Pod}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("runner-deaths").
		WatchesRawSource(w.Pods.source(pods, hasRunner))
	if w.Gap != nil {
		w.Gap.configure(compactor{labels: jobLabels, annotations: jobAnnotations}, names)
		if err := mgr.Add(w.Gap); err != nil {
			return err
		}
		// Started as the replica comes to lead, before the cache syncs:
		// from then on the gap's removals are the watcher's own.
		b = b.WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[ctrl.Request]) error {
			w.Gap.handTo(func(pod *corev1.Pod, at time.Time) {
				w.removedAt(pod, at)
				q.Add(ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)})
			}, w.Pods.HasSynced)
			return nil
		}))
	}
	return b.
		Watches(&v1alpha1.RunnerDeletion{}, notes).
		// A record is one create round trip: with one worker a fleet whose
		// jobs end together waits seconds per thousand deaths (the fleet
		// simulation's record latency). The queue never hands one pod to
		// two workers at once, and the watcher's own state is locked.
		WithOptions(controller.Options{MaxConcurrentReconciles: recordWorkers}).
		Complete(w)
}

// podEvents queue a runner pod on each of its events; a removal is kept
// first, since the cache no longer holds the pod once it is gone.
func (w *Watcher) podEvents() handler.Funcs {
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
		q.Add(ctrl.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			if pod, ok := e.Object.(*cachedPod); ok {
				w.removed(pod.pod())
			}
			enqueue(e.Object, q)
		},
	}
}

// Reconcile records the deaths not yet on record of the pod named req and
// of the pods of that name the cache has dropped, and checks whether the
// runner is stuck.
func (w *Watcher) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// The dropped pods are read before the cache: the informer removes a
	// pod from its store before it hands the delete to the watcher, so a
	// pod read back from the cache here is not one of those, whatever
	// comes in between.
	gone := w.goneOf(req.NamespacedName)
	pod := w.Pods.Get(req.NamespacedName)
	if pod == nil {
		w.setStuck(req.NamespacedName, "")
		w.forgetStall(req.NamespacedName)
	}
	var res ctrl.Result
	var errs []error
	for _, g := range gone {
		// Each removed pod is planned on its own: a runner pod recreated
		// under the same name (legacy ARC) must not hide its predecessor's
		// death.
		if pod != nil && pod.UID == g.pod.UID {
			w.forget(req.NamespacedName, g.pod.UID) // back in the cache
			continue
		}
		retry, _, err := w.record(ctx, g.pod, g.at)
		if err != nil {
			// The others are still planned: one record that cannot be
			// written holds up no other death.
			errs = append(errs, err)
			continue
		}
		if retry == 0 {
			w.forget(req.NamespacedName, g.pod.UID)
		}
		res = sooner(res, retry)
	}
	if pod == nil {
		return res, errors.Join(errs...)
	}
	retry, runner, err := w.record(ctx, pod, time.Time{})
	if err != nil || runner == nil {
		return res, errors.Join(append(errs, err)...)
	}
	w.checkStall(ctx, pod, *runner)
	if retry > 0 {
		return sooner(res, retry), errors.Join(errs...)
	}
	stuck, err := w.checkStuck(ctx, pod, *runner)
	return sooner(res, stuck.RequeueAfter), errors.Join(append(errs, err)...)
}

// sooner is res or a look after d (d > 0), whichever comes first.
func sooner(res ctrl.Result, d time.Duration) ctrl.Result {
	if d > 0 && (res.RequeueAfter == 0 || d < res.RequeueAfter) {
		res.RequeueAfter = d
	}
	return res
}

// setupFollowers makes what follows a pod past its record: the stall
// reporter, and Views, which keeps the fleet's own account on the record.
func (w *Watcher) setupFollowers(mgr ctrl.Manager) error {
	if err := w.setupStallReports(mgr); err != nil {
		return err
	}
	if w.Views == nil {
		w.Views = NewViews(mgr.GetAPIReader(), mgr.GetClient())
		return mgr.Add(w.Views)
	}
	return nil
}
