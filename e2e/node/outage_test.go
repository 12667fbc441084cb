//go:build node

package node

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// scaleWebhook sets the webhook Deployment's replicas and waits until that
// many pods exist and are ready.
func scaleWebhook(t *testing.T, replicas int32) {
	t.Helper()
	ctx := context.Background()
	_, err := cs.AppsV1().Deployments(releaseNamespace).UpdateScale(ctx, releaseName,
		&autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: releaseName, Namespace: releaseNamespace},
			Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		pods := &corev1.PodList{}
		if admin.List(ctx, pods, client.InNamespace(releaseNamespace), client.MatchingLabels{"app.kubernetes.io/instance": releaseName}) != nil {
			return false
		}
		ready := 0
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready++
				}
			}
		}
		return len(pods.Items) == int(replicas) && ready == int(replicas)
	}, 2*time.Minute, 500*time.Millisecond, "%d webhook pods", replicas)
}

// injected reports whether pod carries the vitals sidecar.
func injected(pod *corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == runnerpod.VitalsContainer })
}

// waitInjection waits until a dry-run runner pod comes back injected: the
// API server reaches a webhook pod again.
func waitInjection(t *testing.T, ns string) {
	t.Helper()
	require.Eventually(t, func() bool {
		pod := runnerPod(ns, "probe", "64Mi")
		return admin.Create(context.Background(), pod, client.DryRunAll) == nil && injected(pod)
	}, time.Minute, 500*time.Millisecond, "injection resumes")
}

// With every webhook pod gone, the API server decides alone: the
// injector's Ignore lets runner pods be created (uninstrumented); in an
// enforce namespace the guard's delete failure policy Fail refuses the
// deletes it would have judged, and only those; evictions go through
// (Ignore) except a busy runner's, which its PodDisruptionBudget holds.
func TestWithEveryWebhookPodGoneRunnersStillStartAndOnlyBusyRunnersAreHeld(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	busy := start(t, runnerPod(ns, "busy", "64Mi", "job", "40"))
	plain := podtest.Plain(ns, "app").Obj()
	plain.UID = ""
	plain.Spec.Containers[0].Image, plain.Spec.Containers[0].ImagePullPolicy = runnerImage, corev1.PullNever
	plain.Spec.Containers[0].Args = []string{"job", "300"}
	plain.Spec.TerminationGracePeriodSeconds = busy.Spec.TerminationGracePeriodSeconds
	require.NoError(t, admin.Create(ctx, plain))
	plain2 := plain.DeepCopy()
	plain2.Name, plain2.ResourceVersion = "app-2", ""
	require.NoError(t, admin.Create(ctx, plain2))
	done := start(t, runnerPod(ns, "done", "64Mi", "job", "1"))
	waitPod(t, done, "the runner to finish", 60*time.Second, func(p *corev1.Pod) bool {
		s := containerStatus(p, "runner")
		return s != nil && s.State.Terminated != nil
	})
	require.Eventually(t, func() bool {
		return admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: recorder.BudgetName(busy)}, &policyv1.PodDisruptionBudget{}) == nil
	}, 30*time.Second, 200*time.Millisecond, "the leader keeps a budget on the busy runner")
	other := newNamespace(t)
	otherBusy := start(t, runnerPod(other, "busy", "64Mi", "job", "300"))

	scaleWebhook(t, 0)
	t.Cleanup(func() {
		scaleWebhook(t, 2)
		waitInjection(t, ns)
	})

	t.Run("a runner pod is still created, without the sidecar", func(t *testing.T) {
		pod := runnerPod(ns, "new", "64Mi", "job", "1")
		require.NoError(t, admin.Create(ctx, pod), "the injector's failure policy is Ignore")
		assert.False(t, injected(pod))
	})
	t.Run("the delete of a busy runner is refused", func(t *testing.T) {
		err := as(t, reaper).Delete(ctx, busy)
		require.Error(t, err, "the guard's DELETE failure policy is Fail")
		assert.Contains(t, err.Error(), "failed calling webhook")
		assert.False(t, gone(t, busy))
	})
	t.Run("the delete of a pod that is not a runner goes through", func(t *testing.T) {
		require.NoError(t, as(t, reaper).Delete(ctx, plain), "matchConditions keep the API server from calling the guard")
	})
	evict := func(pod *corev1.Pod) error {
		return cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns}})
	}
	t.Run("a busy runner's eviction is refused by its budget", func(t *testing.T) {
		err := evict(busy)
		require.Error(t, err, "the eviction failure policy is Ignore; the budget holds")
		assert.Contains(t, err.Error(), "disruption budget")
		assert.False(t, gone(t, busy))
	})
	t.Run("a finished runner and a pod that is no runner's are evicted", func(t *testing.T) {
		require.NoError(t, evict(done))
		require.NoError(t, evict(plain2))
	})
	t.Run("deleting a namespace with a busy runner completes", func(t *testing.T) {
		require.NoError(t, admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}))
		require.Eventually(t, func() bool { return gone(t, otherBusy) }, 90*time.Second, 500*time.Millisecond,
			"the namespace controller is exempt in matchConditions")
	})
}
