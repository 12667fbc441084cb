//go:build e2e

package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The scenario: the scheduler marks a busy runner for preemption
// (a pod of higher priority, which edit can create, wants its place), its
// delete is refused and the condition stays; ten minutes later an
// operator drains the runner with the override. The record's class is the
// drain's (sigterm), not preempted: no preemption happened. The record
// keeps the condition, and its basis says it did not end the runner and
// that the scheduler's delete was refused.
func TestAStalePreemptionDoesNotClassTheOperatorsDrain(t *testing.T) {
	const scheduler = "system:kube-scheduler"
	ns := newNamespace(t, nil)
	operator := may(t, ns, person("olga@example.com"), "edit")
	mayOverride(t, ns, operator)
	pod := create(t, nil, busyRunner(ns, "marked"))

	// The condition as the scheduler writes it through pods/status, the
	// runner's own state as its node reported it.
	marked := metav1.NewTime(time.Now().Add(-10 * time.Minute).Truncate(time.Second))
	preemption := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler",
		Message: "ci/critical: preempting to accommodate a higher priority pod", LastTransitionTime: marked}
	st := pod.Status
	st.Conditions = append(st.Conditions, preemption)
	setStatus(t, pod, st)

	err := deletePod(as(t, scheduler), pod)
	require.True(t, apierrors.IsForbidden(err), "the scheduler's delete of a busy runner is refused; got %v", err)
	eventually(t, func() bool { return counts(storedRefusals(t, pod))[scheduler+" delete"] > 0 }, "the refusal is kept on the pod")

	require.NoError(t, patchMeta(operator.client(t), pod, annotations(runnerpod.AllowDelete, "node pool upgrade")))
	require.NoError(t, deletePod(operator.client(t), pod))
	end := podtest.Runner(ns, pod.Name).Terminated("runner", 143, "Error")
	end.Status.Conditions = append(end.Status.Conditions, preemption)
	kubeletEnds(t, pod, end)

	rec := oneDeath(t, pod)
	assert.Equal(t, string(death.SigTerm), rec.Class, "the operator's drain ended the runner")
	assert.Equal(t, operator.user, rec.DeletedBy)
	require.NotNil(t, rec.Disruption, "the record says the condition was there")
	assert.Equal(t, "PreemptionByScheduler", rec.Disruption.Reason)
	assert.Contains(t, rec.ClassBasis, "the pod carried DisruptionTarget PreemptionByScheduler (set at "+marked.UTC().Format(time.RFC3339)+"), which did not end the runner")
	assert.Contains(t, rec.ClassBasis, "refused: delete by "+scheduler)
}
