package recorder

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// BudgetName is the name of pod's budget: from its UID, so a pod recreated
// under the same name never takes over another's budget.
func BudgetName(pod *corev1.Pod) string { return "runnerguard-" + string(pod.UID) }

// Budget is the PodDisruptionBudget that holds pod's eviction in the API
// server: minAvailable 1 (an integer needs no scale subresource, so it
// holds pods of any owner, ARC's EphemeralRunners included) of the one pod
// whose budget label is its UID, unhealthy or not (IfHealthyBudget: a
// budget of one pod is never healthy without it). The pod owns it, so the
// garbage collector removes it with the pod.
func Budget(pod *corev1.Pod) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: pod.Namespace, Name: BudgetName(pod),
			Labels:          map[string]string{"app.kubernetes.io/managed-by": BudgetManagedBy},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}},
		},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               ptr.To(intstr.FromInt32(1)),
			Selector:                   &metav1.LabelSelector{MatchLabels: map[string]string{runnerpod.BudgetLabel: string(pod.UID)}},
			UnhealthyPodEvictionPolicy: ptr.To(policyv1.IfHealthyBudget),
		},
	}
}

// BudgetLabelPlan is the budget label's patch: the pod's UID while it
// should have a budget, nil to remove it once it should not; ok false when
// the label is already what it should be.
func BudgetLabelPlan(pod *corev1.Pod, budget bool) (value *string, ok bool) {
	have, present := pod.Labels[runnerpod.BudgetLabel]
	switch {
	case budget && have != string(pod.UID):
		return ptr.To(string(pod.UID)), true
	case !budget && present:
		return nil, true
	}
	return nil, false
}

// ensureBudget creates pod's budget unless the cache holds it; inPlace
// false and no error: a budget someone removed is no longer wanted
// (stillWanted), and the pod is judged again.
func (m *Marker) ensureBudget(ctx context.Context, pod *corev1.Pod) (inPlace bool, err error) {
	b := Budget(pod)
	err = m.Client.Get(ctx, client.ObjectKeyFromObject(b), &policyv1.PodDisruptionBudget{})
	if !apierrors.IsNotFound(err) {
		return err == nil, err
	}
	// The pod labelled for its budget when this judgement began: the
	// budget was made, and someone removed it. A first one costs no
	// fresh reads at a job's start.
	if pod.Labels[runnerpod.BudgetLabel] == string(pod.UID) {
		if ok, err := m.stillWanted(ctx, pod); !ok || err != nil {
			return false, err
		}
	}
	if err := m.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, err
	}
	return true, nil
}

// stillWanted judges pod again, with the registration and its namespace
// read afresh, before a budget someone removed is put back: the README's
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

// removeBudget deletes pod's budget, if any.
func (m *Marker) removeBudget(ctx context.Context, pod *corev1.Pod) error {
	return client.IgnoreNotFound(m.Client.Delete(ctx, Budget(pod)))
}

// patch writes the marks' plan and the budget label with one merge patch
// that carries the pod's UID: a pod recreated under its name has another,
// which the API server refuses to change, so it never gets another pod's
// marks. A pod already gone or replaced needs none.
func (m *Marker) patch(ctx context.Context, pod *corev1.Pod, marks map[string]*string, label *string, setLabel bool) error {
	meta := map[string]any{"uid": pod.UID}
	if marks != nil {
		meta["annotations"] = marks
	}
	if setLabel {
		meta["labels"] = map[string]*string{runnerpod.BudgetLabel: label}
	}
	body, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	target := runnerpod.Meta()
	target.Namespace, target.Name = pod.Namespace, pod.Name
	err = m.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body))
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}
