package watch

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

	mu    sync.Mutex
	stuck map[types.UID]stuckRunner
}

type stuckRunner struct{ namespace, reason, name string }

// SetupWithManager runs the watcher, leader-elected, on mgr's pod cache.
func (w *Watcher) SetupWithManager(mgr ctrl.Manager) error {
	names := w.Config.RunnerContainerNames()
	hasRunner := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*corev1.Pod)
		return ok && slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return slices.Contains(names, c.Name) })
	})
	w.stuck = map[types.UID]stuckRunner{}
	return ctrl.NewControllerManagedBy(mgr).Named("runner-deaths").For(&corev1.Pod{}).WithEventFilter(hasRunner).Complete(w)
}

// Reconcile records the pod's runner deaths not yet on record and checks
// whether its runner is stuck.
func (w *Watcher) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := w.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			w.setStuck(types.UID(""), req.Namespace, "", req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if ok, err := w.optedIn(ctx, pod.Namespace); err != nil || !ok {
		return ctrl.Result{}, err
	}
	runner, ok := runnerpod.Match(pod, w.Config.Presets)
	if !ok {
		return ctrl.Result{}, nil
	}
	for _, r := range death.Deaths(pod, runner) {
		if wait := w.awaitVitals(pod, r); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		if death.CausedByDeletion(pod, r) {
			r.Deleted = true
			by, err := w.Deaths.DeletedBy(ctx, pod)
			if err != nil {
				return ctrl.Result{}, err
			}
			r.DeletedBy = by
		}
		if _, err := w.Deaths.Record(ctx, pod, r); err != nil {
			return ctrl.Result{}, err
		}
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
	ns := &corev1.Namespace{}
	if err := w.Client.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return w.Namespaces.Matches(labels.Set(ns.Labels)), nil
}
