package watch

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/death"
	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

// Watcher records runner deaths as the kubelet reports them.
type Watcher struct {
	Client client.Client
	Config config.Config
	Deaths *death.Recorder
	// Namespaces selects the opted-in namespaces by their labels.
	Namespaces labels.Selector
	// StuckAfter is how long a runner may wait to start before it is
	// reported stuck.
	StuckAfter time.Duration
	Now        func() time.Time

	mu sync.Mutex
	// stuck holds the waiting reason of each stuck runner's pod.
	stuck map[types.NamespacedName]string
	// final keeps the last state of pods the cache has dropped, so a death
	// reported just before the pod went (the kubelet's final delete follows
	// the runner's end within a second) is still recorded.
	final sync.Map
	// retried marks the gone pods already given a second look for their
	// deleter.
	retried sync.Map
}

// deleterWait is how long a pod removed while its runner ran waits for the
// guard's note of who deleted it.
const deleterWait = 2 * time.Second

// SetupWithManager runs the watcher, leader-elected, on mgr's pod cache.
func (w *Watcher) SetupWithManager(mgr ctrl.Manager) error {
	names := w.Config.RunnerContainerNames()
	hasRunner := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		return ok && slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return slices.Contains(names, c.Name) })
	})
	w.stuck = map[types.NamespacedName]string{}
	enqueue := func(o client.Object, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
		q.Add(ctrl.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	h := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueue(e.Object, q)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			enqueue(e.ObjectNew, q)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[ctrl.Request]) {
			if pod, ok := e.Object.(*corev1.Pod); ok {
				w.final.Store(client.ObjectKeyFromObject(pod), pod.DeepCopy())
			}
			enqueue(e.Object, q)
		},
	}
	return ctrl.NewControllerManagedBy(mgr).Named("runner-deaths").
		Watches(&corev1.Pod{}, h, builder.WithPredicates(hasRunner)).Complete(w)
}

// Reconcile records the pod's runner deaths not yet on record and checks
// whether its runner is stuck.
func (w *Watcher) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	gone := false
	if err := w.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		w.setStuck(req.NamespacedName, "")
		last, ok := w.final.LoadAndDelete(req.NamespacedName)
		if !ok {
			return ctrl.Result{}, nil
		}
		pod, gone = last.(*corev1.Pod), true
	} else {
		w.final.Delete(req.NamespacedName)
	}
	if ok, err := w.optedIn(ctx, pod.Namespace); err != nil || !ok {
		return ctrl.Result{}, err
	}
	runner, ok := runnerpod.Match(pod, w.Config.Presets)
	if !ok {
		return ctrl.Result{}, nil
	}
	deaths := death.Deaths(pod, runner)
	if st := runnerpod.RunnerStatus(pod, runner.Containers); gone && st.State == runnerpod.Running {
		// Removed while its runner ran (a force delete, pod GC of a lost
		// node): no terminated state will ever be reported.
		r := death.New(pod, runner, st, "")
		r.Deleted = true
		deaths = append(deaths, r)
	}
	for _, r := range deaths {
		if wait := w.awaitVitals(pod, r); wait > 0 && !gone {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		if pod.DeletionTimestamp != nil || gone {
			by, err := w.Deaths.DeletedBy(ctx, pod)
			if err != nil {
				return ctrl.Result{}, err
			}
			r.DeletedBy = by
			r.Deleted = r.Deleted || death.CausedByDeletion(pod, r)
			if gone && r.Deleted && by == "" {
				if _, again := w.retried.LoadOrStore(pod.UID, true); !again {
					// The guard notes the deleter as the delete is admitted,
					// racing the delete event here: look once more.
					w.final.Store(req.NamespacedName, pod)
					return ctrl.Result{RequeueAfter: deleterWait}, nil
				}
				w.retried.Delete(pod.UID)
			}
		}
		if _, err := w.Deaths.Record(ctx, pod, r); err != nil {
			return ctrl.Result{}, err
		}
	}
	if gone {
		return ctrl.Result{}, nil
	}
	return w.checkStuck(ctx, pod, runner)
}

// VitalsWait bounds how long a death waits for the vitals sidecar's final
// reading. On a real node the kubelet reports the runner's end first and
// only then stops the sidecar, which leaves its final reading as it exits:
// a record made at the first report would never carry the vitals.
const VitalsWait = 15 * time.Second

// awaitVitals returns how long to wait before recording r: while the pod's
// vitals sidecar still runs after the runner ended, up to VitalsWait past
// the end. The sidecar's termination is a pod update that brings the pod
// back sooner.
func (w *Watcher) awaitVitals(pod *corev1.Pod, r death.Record) time.Duration {
	if r.Vitals != nil || r.FinishedAt == nil {
		return 0
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name == runnerpod.VitalsContainer && cs.State.Running != nil {
			if left := r.FinishedAt.Add(VitalsWait).Sub(w.Now()); left > 0 {
				return min(left, time.Second)
			}
		}
	}
	return 0
}

func (w *Watcher) optedIn(ctx context.Context, name string) (bool, error) {
	// Metadata only: the same namespace informer the injector reads.
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := w.Client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return w.Namespaces.Matches(labels.Set(ns.Labels)), nil
}
