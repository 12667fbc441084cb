//go:build e2e

package api

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// An enforce namespace holds its busy runners by one budget, the one
// recorder.Budget makes: a budget another made under its name gives way
// to it, a pod an earlier release held by a budget of its own is held by
// the namespace's and its old budget goes, and a budget changed while
// still wanted is put back as it must be.
func TestAnEnforceNamespaceHoldsItsBusyRunnersByOneBudgetOfItsOwn(t *testing.T) {
	ctx := context.Background()
	ns := outageNamespace(t, nil)
	key := client.ObjectKey{Namespace: ns, Name: recorder.BudgetName}
	squat := recorder.Budget(ns)
	squat.Labels, squat.Spec.MinAvailable = nil, ptr.To(intstr.FromInt32(0))
	require.NoError(t, admin.Create(ctx, squat), "a budget under runnerguard's name, before the namespace's first busy runner")
	startOutage(t)

	busy := busyPod(t, ns, "busy")
	ours := func() bool {
		b := &policyv1.PodDisruptionBudget{}
		return admin.Get(ctx, key, b) == nil && b.Labels["app.kubernetes.io/managed-by"] == recorder.BudgetManagedBy &&
			b.Spec.MinAvailable != nil && b.Spec.MinAvailable.IntVal == math.MaxInt32
	}
	eventually(t, func() bool { return ours() && budgetOf(t, busy) }, "the busy runner is held by runnerguard's budget, which took the other's place")

	// An earlier release's hold: the pod labelled with its UID, its own
	// budget.
	old := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "runnerguard-" + string(busy.UID),
		Labels: map[string]string{"app.kubernetes.io/managed-by": recorder.BudgetManagedBy}},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{runnerpod.BudgetLabel: string(busy.UID)}}}}
	require.NoError(t, admin.Create(ctx, old))
	patch := []byte(`{"metadata":{"labels":{"` + runnerpod.BudgetLabel + `":"` + string(busy.UID) + `"}}}`)
	require.NoError(t, admin.Patch(ctx, busy.DeepCopy(), client.RawPatch("application/merge-patch+json", patch)))
	eventually(t, func() bool {
		return budgetOf(t, busy) && apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(old), &policyv1.PodDisruptionBudget{}))
	}, "the pod an earlier release held is held by the namespace's budget, and its own budget is gone")

	// Changed by an override's holder while the namespace is still in
	// enforce and its runner busy: put back.
	weaken := []byte(`{"spec":{"minAvailable":0}}`)
	require.NoError(t, admin.Patch(ctx, recorder.Budget(ns), client.RawPatch("application/merge-patch+json", weaken)))
	eventually(t, ours, "the changed budget is put back as runnerguard's")
}
