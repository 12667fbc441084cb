package recorder

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/namespace"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// markerAnnotations are the pod annotations the cache keeps for the
// marker: the override (which frees the pod), the marks and their
// ownership.
var markerAnnotations = []string{runnerpod.AllowDelete, runnerpod.KarpenterDoNotDisrupt, runnerpod.ClusterAutoscalerSafeEvict,
	runnerpod.ClusterAutoscalerLocalVolumes, runnerpod.Marked}

// markerLabels are the pod labels the cache keeps for the marker: the
// budget label.
var markerLabels = []string{runnerpod.BudgetLabel}

// Marker keeps the autoscalers' marks on runner pods following the
// guard's protection (presets.Protected, the guard's own pod-level
// rules, through Judge): a node holding only idle or finished runners can
// be consolidated, one holding a busy runner is not. In enforce namespaces
// it also holds each busy runner's pod by its namespace's
// PodDisruptionBudget (Budget), so the API server refuses its eviction
// without the webhook. It runs on the
// leader, the marks' and the budgets' one writer, on the watcher's cache
// of runner pods: a pod created while runnerguard was down is marked when
// the leader sees it, and a mark is never left behind by a replica that
// died.
type Marker struct {
	Pods   *PodCache
	Client client.Client
	// Reader reads the API server itself, past the caches.
	Reader client.Reader
	Config config.Config
	// Namespaces selects the opted-in namespaces: a pod elsewhere is not
	// protected, so it keeps none of runnerguard's marks.
	Namespaces labels.Selector
	// Modes says which namespaces are in enforce mode (budgets).
	Modes *Modes
	Now   func() time.Time

	// again judges every cached pod again (a namespace's mode changed).
	again chan event.TypedGenericEvent[client.Object]

	// Jobs keeps the job each fleet's record named, for the death records
	// (Watcher.Jobs); nil keeps none.
	Jobs *LastJobs

	// Zombies names the zombies the fleets' evidence shows (nil: none
	// named, and the guard holds them as busy).
	Zombies *Zombies
	// Over asks the CI services whether busy runners' jobs have ended
	// (nil: none is asked); a runner whose job ended long ago is a zombie.
	Over *JobsOver

	// records holds, by preset, the fleets' own records of their runners'
	// jobs (ARC's EphemeralRunners) where the API server serves them.
	records map[runnerpod.PresetName]*Records
	// starts keeps when the records showed each runner's job begin, for
	// the marker to write with the marks that start brings.
	starts *JobStarts
	// budgets serialises the workers' budget checks and writes.
	budgets budgetLocks
}

// SetupWithManager runs the marker on the watcher's pod cache, which the
// watcher adds to mgr (set the watcher up first), and on each fleet's own
// records (presets.Keepers: ARC's EphemeralRunners) while the API server
// serves them (Records follows the fleet's CRD: installed after
// runnerguard, it is read without a restart).
func (m *Marker) SetupWithManager(mgr ctrl.Manager) error {
	names := m.Config.RunnerContainerNames()
	hasRunner := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*cachedPod)
		return ok && slices.ContainsFunc(pod.containers, func(c string) bool { return runnerpod.IsRunnerContainer(names, c) })
	})
	m.again = make(chan event.TypedGenericEvent[client.Object], 1024)
	if m.Modes != nil {
		m.Modes.Changed = m.judgeAll
	}
	if m.Over != nil {
		m.Over.found = m.judgeAgain
		if err := mgr.Add(m.Over); err != nil {
			return err
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).Named("runner-marks").WithOptions(controller.Options{MaxConcurrentReconciles: markWorkers}).
		WatchesRawSource(m.Pods.source(&handler.EnqueueRequestForObject{}, hasRunner)).
		WatchesRawSource(source.Channel(m.again, &handler.EnqueueRequestForObject{})).
		// A namespace's labels (opt-in, mode) judge its pods again.
		Watches(namespace.Meta(), handler.EnqueueRequestsFromMapFunc(m.podsOf)).
		// A namespace's budget someone removed or changed is put back while
		// its pods are busy: its deletion, its creation and a change of its
		// spec, not the disruption controller's status writes, which come
		// with most pod changes and would judge every held pod again.
		Watches(&policyv1.PodDisruptionBudget{}, handler.EnqueueRequestsFromMapFunc(m.podsHeldIn),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == BudgetName }),
				predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool { return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() }})).
		// A node's drain deadline frees its busy runners when it comes.
		Watches(nodeMeta(), handler.EnqueueRequestsFromMapFunc(m.podsOnNode), builder.WithPredicates(predicate.AnnotationChangedPredicate{}))
	m.records, m.starts = map[runnerpod.PresetName]*Records{}, NewJobStarts()
	for _, k := range presets.Keepers() {
		r, err := NewRecords(mgr.GetConfig(), k, m.starts, m.Jobs)
		if err != nil {
			return err
		}
		if err := mgr.Add(r); err != nil {
			return err
		}
		m.records[k.Name()] = r
		b = b.WatchesRawSource(r.source())
	}
	return b.Complete(m)
}

// Reconcile brings the pod's marks and budget in line with its
// judgement, names a zombie and ends it when the operator asked, and looks
// again when the protection ends or the zombie is due.
func (m *Marker) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := m.Pods.Get(req.NamespacedName)
	if m.Zombies != nil {
		m.Zombies.seen(req.NamespacedName, pod)
	}
	if pod == nil {
		m.starts.written(req.NamespacedName)
		m.Over.forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	res, err := m.follow(ctx, req, pod)
	if err != nil || m.Zombies == nil {
		return res, err
	}
	return m.Zombies.endDue(ctx, pod, m.Config, m.Now(), res)
}

// follow brings the pod's marks and budget in line with its judgement,
// naming the zombie it finds.
func (m *Marker) follow(ctx context.Context, req ctrl.Request, pod *corev1.Pod) (ctrl.Result, error) {
	j, known, err := m.judge(ctx, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := m.nameZombie(ctx, pod, j); err != nil {
		return ctrl.Result{}, err
	}
	m.holdForOver(pod, j)
	budget := m.Config.Marks.Budgets && j.Budget
	if !known {
		// The mode is not read yet: the hold stays as it is (a pod an
		// earlier release labelled with its UID is held too, and relabelled
		// held once the namespace's budget is in place).
		_, budget = pod.Labels[runnerpod.BudgetLabel]
	}
	requeue, budgetErr := m.hold(ctx, pod, budget)
	if requeue {
		// Its namespace or the registration changed since it was judged:
		// its marks follow once the cache has the change.
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	plan, stamp := m.plan(pod, j)
	label, setLabel := BudgetLabelPlan(pod, budget)
	setLabel = setLabel && budgetErr == nil
	if plan != nil || setLabel {
		if err := m.patch(ctx, pod, plan, label, setLabel); err != nil {
			return ctrl.Result{}, err
		}
		logf.FromContext(ctx).V(1).Info("runner pod marks follow its protection", "pod", req.NamespacedName, "busy", j.Busy, "budget", budget)
	}
	if stamp {
		m.starts.written(req.NamespacedName)
	}
	if setLabel {
		if err := m.removeOldBudget(ctx, pod); err != nil {
			return ctrl.Result{}, err
		}
	}
	if budgetErr != nil {
		return ctrl.Result{}, budgetErr
	}
	switch {
	case !known:
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case j.Busy && !j.Until.IsZero():
		// A second past the end: the guard counts whole seconds past the
		// cap (runnerpod.ProtectionEnds).
		return ctrl.Result{RequeueAfter: max(j.Until.Sub(m.Now())+time.Second, time.Second)}, nil
	}
	return ctrl.Result{}, nil
}

// plan is the annotations' patch of pod: its marks, and the job's start
// that the records showed, which goes with the marks it brings (one
// patch); stamp says the start is in it.
func (m *Marker) plan(pod *corev1.Pod, j Judgement) (map[string]*string, bool) {
	plan := MarkPlan(pod, j, m.Config.Marks)
	started, stamp := m.starts.of(pod)
	if stamp {
		if plan == nil {
			plan = map[string]*string{}
		}
		plan[runnerpod.JobAssignedAt] = &started
	}
	return plan, stamp
}

// nameZombie names the zombie j found on pod, if any: named, the pod's
// update judges it again, no longer busy.
func (m *Marker) nameZombie(ctx context.Context, pod *corev1.Pod, j Judgement) error {
	if j.Zombie == nil || m.Zombies == nil {
		return nil
	}
	runner, ok := presets.Match(pod, m.Config.Presets)
	if !ok {
		return nil
	}
	return m.Zombies.name(ctx, pod, runner, *j.Zombie)
}

// judgeAll queues every cached runner pod to be judged again.
func (m *Marker) judgeAll() {
	for _, key := range m.Pods.Keys("") {
		pod := runnerpod.Meta()
		pod.Namespace, pod.Name = key.Namespace, key.Name
		// Every pod, however many: one left out would keep a budget its
		// namespace's new mode no longer wants (or lack one it does) until
		// its next event. The controller drains the channel; this runs on
		// the mode reader's own goroutine, which may wait for it.
		m.again <- event.TypedGenericEvent[client.Object]{Object: pod}
	}
}

// podsOnNode is the runner pods bound to node o.
func (m *Marker) podsOnNode(_ context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, key := range m.Pods.OnNode(o.GetName()) {
		reqs = append(reqs, reconcile.Request{NamespacedName: key})
	}
	return reqs
}

// nodeMeta is a Node as metadata: the marker reads only its annotations
// (the drain deadline), so it keeps no node's spec or status.
func nodeMeta() *metav1.PartialObjectMetadata {
	n := &metav1.PartialObjectMetadata{}
	n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return n
}

// node is the metadata of pod's node, nil when it is not bound or gone.
func (m *Marker) node(ctx context.Context, pod *corev1.Pod) (*corev1.Node, error) {
	if pod.Spec.NodeName == "" {
		return nil, nil
	}
	n := nodeMeta()
	if err := m.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, n); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &corev1.Node{ObjectMeta: n.ObjectMeta}, nil
}

// podsOf is the runner pods of namespace o.
func (m *Marker) podsOf(_ context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, key := range m.Pods.Keys(o.GetName()) {
		reqs = append(reqs, reconcile.Request{NamespacedName: key})
	}
	return reqs
}
