package recorder

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/responder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// ResponderFieldManager is the field manager of runnerguard's own account
// in an Eviction's status.
const ResponderFieldManager = "runnerguard-responder"

// ResponderRecheck is how often a held runner is judged again: its job's
// end shows in the pod or its fleet's record, whose events bring it
// sooner; this bounds the wait where none comes (a lease that lapsed).
const ResponderRecheck = 10 * time.Second

// byTargetPod indexes Evictions by their target pod's namespace/name, so a
// pod's change brings its Evictions.
const byTargetPod = "targetPod"

// Responder is runnerguard as the eviction responder its injector names on
// runner pods, where the API server serves lifecycle.k8s.io/v1alpha1: it
// answers each Eviction that names it (responder.Decide) with the marker's
// own judgement of the pod, the guard's pod-level rules, so an Eviction
// waits exactly while the guard would refuse the eviction. It runs on the
// leader, on the marker's caches, and keeps for the watcher the request
// each pod went on.
type Responder struct {
	Marker  *Marker
	Dynamic dynamic.Interface
	// Answered receives the request each pod went on (Watcher.Evictions).
	Answered *Answered
	Now      func() time.Time

	informer toolscache.SharedIndexInformer
}

// SetupWithManager watches the Evictions that name runnerguard (the
// controller labels each Eviction with its responders' names) and the
// runner pods, whose changes (a job's end) bring their Evictions. Set the
// marker up first: the responder judges with it.
func (r *Responder) SetupWithManager(mgr ctrl.Manager) error {
	res := r.Dynamic.Resource(responder.Evictions).Namespace(metav1.NamespaceAll)
	named := func(o *metav1.ListOptions) { o.LabelSelector = responder.Name }
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			named(&o)
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			named(&o)
			return res.Watch(ctx, o)
		},
	}
	r.informer = toolscache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, toolscache.Indexers{byTargetPod: targetPodIndex})
	if err := mgr.Add(r); err != nil {
		return err
	}
	evictions := syncingInformer{Informer: &source.Informer{Informer: r.informer, Handler: &handler.EnqueueRequestForObject{}}, synced: r.informer.HasSynced}
	return ctrl.NewControllerManagedBy(mgr).Named("eviction-responder").
		WatchesRawSource(evictions).
		WatchesRawSource(r.Marker.Pods.source(handler.EnqueueRequestsFromMapFunc(r.evictionsOf))).
		Complete(r)
}

// Start runs the Evictions' informer, on the leader only.
func (r *Responder) Start(ctx context.Context) error {
	r.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection: only the leader answers.
func (r *Responder) NeedLeaderElection() bool { return true }

func targetPodIndex(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	name, _, _ := unstructured.NestedString(u.Object, "spec", "target", "pod", "name")
	if name == "" {
		return nil, nil
	}
	return []string{u.GetNamespace() + "/" + name}, nil
}

// evictionsOf is the Evictions of pod o.
func (r *Responder) evictionsOf(_ context.Context, o client.Object) []reconcile.Request {
	objs, _ := r.informer.GetIndexer().ByIndex(byTargetPod, o.GetNamespace()+"/"+o.GetName())
	var reqs []reconcile.Request
	for _, obj := range objs {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}})
		}
	}
	return reqs
}

// Reconcile answers one Eviction as responder.Decide says, and looks again
// while it holds the runner.
func (r *Responder) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj, exists, err := r.informer.GetStore().GetByKey(req.Namespace + "/" + req.Name)
	if err != nil || !exists {
		return ctrl.Result{}, err
	}
	e, err := responder.FromUnstructured(obj.(*unstructured.Unstructured))
	if err != nil {
		// A shape this build cannot read: nothing it could answer.
		logf.FromContext(ctx).Error(err, "reading an Eviction", "eviction", req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if e.Turn() == "" || e.Spec.Target.Pod == nil {
		return ctrl.Result{}, nil
	}
	run, known, err := r.runner(ctx, e)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !known {
		// The namespace's mode is not read yet.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	now := r.Now()
	a := responder.Decide(responder.Input{Eviction: e, Runner: run, Now: now})
	uid := e.Spec.Target.Pod.UID
	if a.Withdrawn {
		r.Answered.forget(uid)
	}
	if a.Write != nil {
		u := responder.StatusApply(e.Namespace, e.Name, *a.Write)
		_, err := r.Dynamic.Resource(responder.Evictions).Namespace(e.Namespace).ApplyStatus(ctx, e.Name, u,
			metav1.ApplyOptions{FieldManager: ResponderFieldManager, Force: true})
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("answering Eviction %s: %w", req.NamespacedName, err)
		}
		if a.Let {
			r.Answered.keep(uid, answerRef(e, a), now)
		}
		logf.FromContext(ctx).V(1).Info("eviction answered", "eviction", req.NamespacedName, "pod", e.Spec.Target.Pod.Name,
			"let", a.Let, "requesters", e.Asking(), "message", *a.Write.Message)
	}
	if !run.Busy || e.Turn() != responder.Active {
		return ctrl.Result{RequeueAfter: a.Again}, nil
	}
	again := min(nonzero(a.Again), ResponderRecheck)
	if u := run.Held.Until; !u.IsZero() {
		// A second past the end, as the marker looks again.
		again = min(again, max(u.Sub(now)+time.Second, time.Second))
	}
	return ctrl.Result{RequeueAfter: again}, nil
}

func nonzero(d time.Duration) time.Duration {
	if d <= 0 {
		return ResponderRecheck
	}
	return d
}

// answerRef is what the pod's record says of the request it went on.
func answerRef(e *responder.Eviction, a responder.Answer) v1alpha1.EvictionRequestRef {
	ref := v1alpha1.EvictionRequestRef{Names: e.Requests(), Requesters: e.Asking(), Eviction: e.Name}
	if a.Held > 0 {
		ref.HeldFor = &metav1.Duration{Duration: a.Held}
	}
	return ref
}

// runner is the marker's judgement of e's target pod now, as Decide reads
// it; known false while the namespace's mode is not.
func (r *Responder) runner(ctx context.Context, e *responder.Eviction) (responder.Runner, bool, error) {
	target := e.Spec.Target.Pod
	pod := r.Marker.Pods.Get(types.NamespacedName{Namespace: e.Namespace, Name: target.Name})
	if pod == nil || pod.UID != target.UID {
		return responder.Runner{Gone: true}, true, nil
	}
	run, f, ok, known, err := r.Marker.factsIn(ctx, pod, r.Marker.Client)
	if err != nil {
		return responder.Runner{}, false, err
	}
	if !ok {
		return responder.Runner{Free: "it is no runner pod of runnerguard's presets"}, true, nil
	}
	j, why := holds(pod, run, f)
	if !j.Busy {
		return responder.Runner{Free: why}, known, nil
	}
	s := runnerpod.RunnerStatus(pod, run.Containers)
	term := runnerpod.TermOf(pod, s, run.Preset, f.Now)
	var node *runnerpod.NodeDrain
	if d, ok := runnerpod.NodeDrainFor(f.Node, pod); ok {
		node = &d
	}
	h := responder.Holding{Pod: pod, Preset: run.Preset, Term: term, Job: r.job(pod, run),
		Until: j.Until, Why: responder.UntilWhy(pod, run.Preset, term, j.Until, node)}
	if s.Container != nil {
		h.Container = s.Container.Name
	}
	return responder.Runner{Busy: true, Held: h}, known, nil
}

// holds is the marker's judgement of pod as the responder acts on it: in a
// warn-mode namespace the guard lets a busy runner's eviction through, so
// the responder does not hold it either, and says what enforce would do.
func holds(pod *corev1.Pod, run runnerpod.Runner, f Facts) (Judgement, string) {
	j, why := JudgeWhy(pod, run, f)
	if j.Busy && !f.Enforce {
		return Judgement{Judged: true}, "the guard is in warn mode in its namespace; enforce mode would hold it until its job ends"
	}
	return j, why
}

// job is the runner's job as the leader knows it without a read: its
// fleet's record as the marker's watch last saw it, else the pod's marks.
func (r *Responder) job(pod *corev1.Pod, run runnerpod.Runner) *v1alpha1.Job {
	if presets.KeepsRecord(run) {
		if j := r.Marker.Jobs.Job(presets.RecordRef(run, pod).UID); j != nil {
			return j
		}
	}
	return runnerpod.JobFromPod(pod, run.Preset.Job)
}
