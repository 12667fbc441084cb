package recorder

import (
	"context"
	"encoding/json"
	"math"
	"sync"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// BudgetManagedBy is the app.kubernetes.io/managed-by label of every budget
// the marker keeps: what an operator deletes them by in an emergency.
const BudgetManagedBy = "runnerguard"

// BudgetCacheOptions restricts the manager's informer of
// PodDisruptionBudgets to the marker's own.
func BudgetCacheOptions() cache.ByObject {
	return cache.ByObject{Label: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": BudgetManagedBy})}
}

// BudgetName is the name of the one budget the marker keeps in each
// enforce namespace that has held a busy runner.
const BudgetName = "runnerguard-busy-runners"

// BudgetHeld is the budget label's value on a pod the budget holds.
const BudgetHeld = "held"

// Budget is namespace's PodDisruptionBudget: it selects the pods labelled
// held (only the marker writes the label) and wants more of them available
// than can ever exist, so the API server refuses the eviction of every pod
// it selects, unhealthy or not (IfHealthyBudget: a budget that can never
// be healthy lets no unhealthy pod go either), and lets a pod go as soon as
// its label is taken off. minAvailable as an integer needs no owner's scale
// (an EphemeralRunner and a GitLab build pod have none), and no pod the
// label joins by mistake can let another go, as it could under a count.
// One budget a namespace, not one a busy pod: the eviction API and the
// disruption controller weigh every budget of a pod's namespace on each
// eviction and pod change, and a job's start and end then cost one write
// of the pod each (docs/performance/logs/2026-12-07-budgets.md).
func Budget(namespace string) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: BudgetName,
			Labels: map[string]string{"app.kubernetes.io/managed-by": BudgetManagedBy},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               ptr.To(intstr.FromInt32(math.MaxInt32)),
			Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{runnerpod.BudgetLabel: BudgetHeld}},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.IfHealthyBudget),
		},
	}
}

// BudgetLabelPlan is the budget label's patch: held while the pod should
// be held, nil to remove it once it should not; ok false when the label is
// already what it should be.
func BudgetLabelPlan(pod *corev1.Pod, budget bool) (value *string, ok bool) {
	have, present := pod.Labels[runnerpod.BudgetLabel]
	switch {
	case budget && have != BudgetHeld:
		return ptr.To(BudgetHeld), true
	case !budget && present:
		return nil, true
	}
	return nil, false
}

// hold puts the budget of pod's namespace in place when budget says the
// pod is to be held: before its label makes the budget hold it (taking the
// label off frees the pod; the budget stays for the namespace's other busy
// runners). requeue: the budget is not in place yet. err: it cannot be put
// in place (a quota, another admission policy); the pod's marks and its
// job's start are written all the same, its label left as it is.
func (m *Marker) hold(ctx context.Context, pod *corev1.Pod, budget bool) (requeue bool, err error) {
	if !budget {
		return false, nil
	}
	inPlace, err := m.ensureBudget(ctx, pod)
	return err == nil && !inPlace, err
}

// podsHeldIn is the runner pods its budget holds in budget o's namespace.
func (m *Marker) podsHeldIn(_ context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	for _, key := range m.Pods.Held(o.GetNamespace()) {
		reqs = append(reqs, reconcile.Request{NamespacedName: key})
	}
	return reqs
}

// ensureBudget puts the budget of pod's namespace in place as Budget
// makes it, unless the cache holds it so. inPlace false and no error: the
// budget is not in place yet (judge the pod again shortly), either because
// one someone removed or changed while pods were held is no longer wanted
// (stillWanted), or because another object held its name, which the
// marker deleted.
func (m *Marker) ensureBudget(ctx context.Context, pod *corev1.Pod) (inPlace bool, err error) {
	mu := m.budgets.of(pod.Namespace)
	mu.Lock()
	defer mu.Unlock()
	want := Budget(pod.Namespace)
	have := &policyv1.PodDisruptionBudget{}
	err = m.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	found := err == nil
	if found && holdsAsBudget(have) {
		return true, nil
	}
	// Removed or changed while the namespace's pods were held (by an
	// operator's row, or an override's holder), or not yet made: the
	// registration and the namespace are read afresh before it is made,
	// since another worker may have just let its pods go for a switch the
	// cache does not show yet. A namespace's budget is made once.
	if ok, err := m.stillWanted(ctx, pod); !ok || err != nil {
		return false, err
	}
	if found {
		have.Spec = want.Spec
		return true, m.Client.Update(ctx, have)
	}
	err = m.Client.Create(ctx, want)
	if apierrors.IsAlreadyExists(err) {
		// Made a moment ago, the cache not yet showing it, or someone
		// else's: the API server says which.
		live := &policyv1.PodDisruptionBudget{}
		if err := m.Reader.Get(ctx, client.ObjectKeyFromObject(want), live); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if holdsAsBudget(live) {
			return true, nil
		}
		// The name is runnerguard's in an opted-in namespace.
		logf.FromContext(ctx).Info("deleting a PodDisruptionBudget that is not runnerguard's but has its name; runnerguard's takes its place", "namespace", pod.Namespace, "name", BudgetName)
		return false, client.IgnoreNotFound(m.Client.Delete(ctx, live, client.Preconditions{UID: &live.UID}))
	}
	return err == nil, err
}

// holdsAsBudget reports whether b is the budget Budget makes, in what
// decides which pods it holds and that none goes.
func holdsAsBudget(b *policyv1.PodDisruptionBudget) bool {
	want := Budget(b.Namespace)
	return b.Labels["app.kubernetes.io/managed-by"] == BudgetManagedBy && b.Spec.MaxUnavailable == nil &&
		apiequality.Semantic.DeepEqual(b.Spec.MinAvailable, want.Spec.MinAvailable) &&
		apiequality.Semantic.DeepEqual(b.Spec.Selector, want.Spec.Selector) &&
		apiequality.Semantic.DeepEqual(b.Spec.UnhealthyPodEvictionPolicy, want.Spec.UnhealthyPodEvictionPolicy)
}

// removeOldBudget deletes the budget of pod alone that a release before
// the namespace's budget kept (named by its UID, and its label's value),
// once: its label is then taken over as held.
func (m *Marker) removeOldBudget(ctx context.Context, pod *corev1.Pod) error {
	if v, ok := pod.Labels[runnerpod.BudgetLabel]; !ok || v == BudgetHeld {
		return nil
	}
	old := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "runnerguard-" + string(pod.UID)}}
	return client.IgnoreNotFound(m.Client.Delete(ctx, old))
}

// stillWanted judges pod again, with the registration and its namespace
// read afresh, before a budget is made or one someone removed is put
// back: the README's
// emergency rows remove the budgets right after they switch the
// registration off or the namespace to warn, sooner than the periodic read
// or the cache may show it. A budget put back then would hold an eviction
// the operator freed; read after the removal, the switch that came before
// it is seen.
func (m *Marker) stillWanted(ctx context.Context, pod *corev1.Pod) (bool, error) {
	if m.Modes == nil {
		return true, nil
	}
	if err := m.Modes.Refresh(ctx); err != nil {
		return false, err
	}
	j, known, err := m.judgeIn(ctx, pod, m.Modes.Reader)
	return known && j.Budget, err
}

// patch writes the marks' plan and the budget label with one merge patch
// that carries the pod's UID: a pod recreated under its name has another,
// which the API server refuses to change, so it never gets another pod's
// marks. A pod already gone or replaced needs none.
func (m *Marker) patch(ctx context.Context, pod *corev1.Pod, marks map[string]*string, label *string, setLabel bool) error {
	meta := map[string]any{}
	if marks != nil {
		meta["annotations"] = marks
	}
	if setLabel {
		meta["labels"] = map[string]*string{runnerpod.BudgetLabel: label}
	}
	err := patchPodMeta(ctx, m.Client, pod, meta)
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}

// patchPodMeta writes meta (labels, annotations) on pod with one merge
// patch of its metadata that carries the pod's UID: the leader's writes of
// what it keeps on a runner pod never land on another pod recreated under
// its name, which the API server refuses (Invalid).
func patchPodMeta(ctx context.Context, c client.Client, pod *corev1.Pod, meta map[string]any) error {
	withUID := map[string]any{"uid": pod.UID}
	for k, v := range meta {
		withUID[k] = v
	}
	body, err := json.Marshal(map[string]any{"metadata": withUID})
	if err != nil {
		return err
	}
	target := runnerpod.Meta()
	target.Namespace, target.Name = pod.Namespace, pod.Name
	return c.Patch(ctx, target, client.RawPatch(types.MergePatchType, body))
}

// budgetLocks serialises the marker's workers' budget checks and writes
// namespace by namespace: two that both miss a namespace's new budget
// would both make it, while one namespace's slow writes hold no other's.
type budgetLocks struct {
	mu sync.Mutex
	ns map[string]*sync.Mutex
}

// of is namespace's lock.
func (b *budgetLocks) of(namespace string) *sync.Mutex {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ns == nil {
		b.ns = map[string]*sync.Mutex{}
	}
	if b.ns[namespace] == nil {
		b.ns[namespace] = &sync.Mutex{}
	}
	return b.ns[namespace]
}
