//go:build e2e

package api

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// decisionsCounted sums the guard's decisions metric on the server.
func decisionsCounted(t *testing.T) float64 {
	t.Helper()
	return serverCounter(t, server, "runnerguard_guard_decisions_total", nil)
}

// logged waits until the server has logged msg with key set to value.
func logged(t *testing.T, msg, key, value string) {
	t.Helper()
	eventually(t, func() bool {
		lines, err := server.LogLines(msg)
		require.NoError(t, err)
		for _, l := range lines {
			if l[key] == value {
				return true
			}
		}
		return false
	}, "the server logs "+msg+" with "+key+"="+value)
}

// noteOf reads the deletion note of pod, nil when there is none.
func noteOf(t *testing.T, pod *corev1.Pod) *v1alpha1.DeletionNote {
	t.Helper()
	n := &v1alpha1.RunnerDeletion{}
	err := admin.Get(context.Background(), client.ObjectKey{Namespace: pod.Namespace, Name: string(pod.UID)}, n)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return &n.Deletion
}

// Issue 28, class 3: reviews the API server never sent, posted to the
// guard by anyone on the pod network with no credentials, as the issue's
// attacker did: none writes a note, a label, an Event or a metric.
func TestReviewsTheAPIServerNeverSentChangeNoRecord(t *testing.T) {
	ns := newNamespace(t, nil)
	operator := may(t, ns, person("olga@example.com"), "edit")
	mayOverride(t, ns, operator)

	t.Run("a forged note cannot pre-empt the real one", func(t *testing.T) {
		pod := create(t, nil, busyRunner(ns, "drained"))
		// The review names the GitLab manager and an override the pod does
		// not carry: the guard allows what the review shows, so it would
		// have noted the manager as the deleter.
		forged := pod.DeepCopy()
		forged.Annotations = map[string]string{runnerpod.AllowDelete: "forged"}
		require.True(t, askGuard(t, deleteReview(t, forged, ownerPrincipal)).Allowed)
		logged(t, "no note: the reviewed object does not show the deletion", "uid", string(pod.UID))
		assert.Nil(t, noteOf(t, pod), "nobody deleted the pod: no note")

		// The operator drains the runner later: the note is the operator's.
		require.NoError(t, patchMeta(operator.client(t), pod, annotations(runnerpod.AllowDelete, "node pool upgrade")))
		require.NoError(t, deletePod(operator.client(t), pod))
		eventually(t, func() bool { return noteOf(t, pod) != nil }, "the real deletion is noted")
		n := noteOf(t, pod)
		assert.Equal(t, operator.user, n.Requester)
		assert.Equal(t, "override", n.Rule)
	})

	t.Run("a review that comes after the deletion began claims nothing", func(t *testing.T) {
		pod := create(t, nil, busyRunner(ns, "gone"))
		// An exempt principal's delete is never reviewed, so no note names
		// a deleter; an attacker watching the pod posts a review of it.
		cfg := rest.CopyConfig(adminCfg)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: config.NamespaceController, Groups: []string{"system:masters"}}
		exempt, err := client.New(cfg, client.Options{})
		require.NoError(t, err)
		require.NoError(t, deletePod(exempt, pod))
		require.False(t, alive(t, pod), "terminating")
		forged := pod.DeepCopy()
		forged.Annotations = map[string]string{runnerpod.AllowDelete: "forged"}
		require.True(t, askGuard(t, deleteReview(t, forged, reaper)).Allowed)
		logged(t, "no metric, Event or note: the pod does not exist with the review's UID, or its deletion had begun", "uid", string(pod.UID))
		assert.Nil(t, noteOf(t, pod))
	})

	t.Run("a review naming no requester erases no deleter", func(t *testing.T) {
		pod := create(t, nil, busyRunner(ns, "anonymous"))
		forged := pod.DeepCopy()
		forged.Annotations = map[string]string{runnerpod.AllowDelete: "forged"}
		before := decisionsCounted(t)
		require.True(t, askGuard(t, deleteReview(t, forged, "")).Allowed)
		assert.False(t, askGuard(t, deleteReview(t, pod, "")).Allowed, "the busy runner's own review is refused")
		logged(t, "review not acted on", "pod", ns+"/anonymous")
		assert.Equal(t, before, decisionsCounted(t), "no metric moved")
		assert.Nil(t, noteOf(t, pod))
		assert.Empty(t, podEvents(t, pod), "no Event")
	})

	t.Run("a review of a pod in kube-system changes nothing there", func(t *testing.T) {
		// No webhook or policy applies in kube-system: the pod is made as
		// any system pod is, without the runner label.
		pod := podtest.Runner("kube-system", "rg-e2e-victim").RunningSince("runner", podtest.Start).Obj()
		pod = create(t, nil, pod)
		require.NotContains(t, pod.Labels, runnerpod.RunnerLabel)
		forged := pod.DeepCopy()
		forged.Annotations = map[string]string{runnerpod.AllowDelete: "forged"}
		before := decisionsCounted(t)
		require.True(t, askGuard(t, deleteReview(t, forged, "mallory")).Allowed)
		assert.False(t, askGuard(t, deleteReview(t, pod, "mallory")).Allowed)
		// The guard acts on a review after its answer: once it has said it
		// will not, nothing it wrote can still be on its way.
		logged(t, "review not acted on", "pod", "kube-system/rg-e2e-victim")
		got := &corev1.Pod{}
		require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
		assert.NotContains(t, got.Labels, runnerpod.RunnerLabel, "not labelled")
		assert.Equal(t, before, decisionsCounted(t), "no metric moved")
		assert.Empty(t, podEvents(t, pod), "no Event")
		assert.Nil(t, noteOf(t, pod), "no note")
	})
}
