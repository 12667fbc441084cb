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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// Then each row of the README's emergency box, run as written, lets busy
// runners go where it says and keeps what it says.
func TestWithEveryWebhookPodGoneRunnersStillStartAndOnlyBusyRunnersAreHeld(t *testing.T) {
	rows := emergencyRows(t)
	require.Len(t, rows, 3, "each row of the README's emergency box has its proof below")
	ensureEphemeralRunnerCRD(t)
	ns := newNamespace(t)
	ctx := context.Background()
	busy, busy2 := start(t, runnerPod(ns, "busy", "64Mi", "job", "3600")), start(t, runnerPod(ns, "busy-2", "64Mi", "job", "3600"))
	idle := arcRunner(t, ns, "idle", false, "job", "3600")
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
	rowNS, rowAll, rowGlass := newNamespace(t), newNamespace(t), newNamespace(t)
	held := map[string][2]*corev1.Pod{}
	for _, n := range []string{rowNS, rowAll, rowGlass} {
		held[n] = [2]*corev1.Pod{start(t, runnerPod(n, "busy", "64Mi", "job", "3600")), start(t, runnerPod(n, "busy-2", "64Mi", "job", "3600"))}
	}
	waitPod(t, idle, "runnerguard to judge the idle runner idle", 90*time.Second, func(p *corev1.Pod) bool {
		return p.Annotations[runnerpod.ClusterAutoscalerSafeEvict] == "true"
	})
	waitBudgets(t, busy, busy2, held[rowNS][0], held[rowNS][1], held[rowAll][0], held[rowAll][1], held[rowGlass][0], held[rowGlass][1])
	other := newNamespace(t)
	otherBusy := start(t, runnerPod(other, "busy", "64Mi", "job", "300"))

	restore := keepRegistration(t)
	scaleWebhook(t, 0)
	t.Cleanup(func() {
		scaleWebhook(t, 2)
		waitInjection(t, ns)
	})
	t.Cleanup(restore)

	t.Run("a runner pod is still created, without the sidecar", func(t *testing.T) {
		pod := runnerPod(ns, "new", "64Mi", "job", "1")
		require.NoError(t, admin.Create(ctx, pod), "the injector's failure policy is Ignore")
		assert.False(t, injected(pod))
	})
	t.Run("with no row run, the delete of a busy runner is refused", func(t *testing.T) {
		err := stays(t, busy, false, "the guard's DELETE failure policy is Fail")
		assert.Contains(t, err.Error(), "failed calling webhook")
	})
	t.Run("with no row run, the delete of a pod that is not a runner goes through", func(t *testing.T) {
		require.NoError(t, as(t, reaper).Delete(ctx, plain), "matchConditions keep the API server from calling the guard")
	})
	t.Run("with no row run, a busy runner's eviction is refused by its budget", func(t *testing.T) {
		err := stays(t, busy, true, "the eviction failure policy is Ignore; the budget holds")
		assert.Contains(t, err.Error(), "disruption budget")
	})
	t.Run("with no row run, an idle runner, a finished one and a pod that is no runner's are evicted", func(t *testing.T) {
		goes(t, idle, true, "an idle ARC runner has no budget")
		goes(t, done, true, "a finished runner")
		goes(t, plain2, true, "a pod that is no runner's")
	})
	t.Run("deleting a namespace with a busy runner completes", func(t *testing.T) {
		require.NoError(t, admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}}))
		require.Eventually(t, func() bool { return gone(t, otherBusy) }, 90*time.Second, 500*time.Millisecond,
			"the namespace controller is exempt in matchConditions")
	})

	t.Run("the row for one namespace lets its busy runners go, and only its", func(t *testing.T) {
		stays(t, held[rowNS][0], false, "before the row, enforce fails closed")
		rowFor(t, rows, "one namespace").run(t, rowNS)
		goes(t, held[rowNS][0], false, "a busy runner's delete in the named namespace")
		goes(t, held[rowNS][1], true, "and a busy runner's eviction")
		stays(t, busy, false, "another namespace's busy runner keeps its delete refused")
		stays(t, busy2, true, "and its eviction held by its budget")
	})
	t.Run("the row for every namespace lets busy runners go everywhere, and keeps the signal policy", func(t *testing.T) {
		rowFor(t, rows, "everywhere must go").run(t, "")
		goes(t, held[rowAll][0], false, "a busy runner's delete")
		goes(t, held[rowAll][1], true, "and a busy runner's eviction")
		goes(t, busy, true, "in every namespace")
		signalPolicyHolds(t, rowAll)
	})

	// Break-glass starts from the installed registration and budgets:
	// the install comes back, the leader puts the budgets back, and the
	// pods go again.
	restore()
	scaleWebhook(t, 2)
	waitBudgets(t, held[rowGlass][0], held[rowGlass][1], busy2)
	scaleWebhook(t, 0)

	t.Run("break-glass lets busy runners go everywhere, and keeps the signal policy", func(t *testing.T) {
		stays(t, held[rowGlass][0], false, "before the row, enforce fails closed")
		stays(t, held[rowGlass][1], true, "and the budget holds")
		rowFor(t, rows, "break-glass").run(t, "")
		goes(t, held[rowGlass][0], false, "a busy runner's delete")
		goes(t, held[rowGlass][1], true, "and a busy runner's eviction")
		goes(t, busy2, false, "in every namespace")
		signalPolicyHolds(t, rowGlass)
	})
}

// waitBudgets waits until the leader keeps a budget on each pod.
func waitBudgets(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		require.Eventually(t, func() bool {
			return admin.Get(context.Background(), client.ObjectKey{Namespace: p.Namespace, Name: recorder.BudgetName(p)}, &policyv1.PodDisruptionBudget{}) == nil
		}, 90*time.Second, 200*time.Millisecond, "the leader keeps a budget on the busy runner %s/%s", p.Namespace, p.Name)
	}
}

// goes asserts that the pod's delete (or eviction) is let through: a
// namespace's new mode reaches the API server's registrations within
// moments, so the request is tried until it is.
func goes(t *testing.T, pod *corev1.Pod, eviction bool, what string) {
	t.Helper()
	var err error
	require.Eventually(t, func() bool {
		err = deleteOrEvict(pod, eviction)
		return err == nil || apierrors.IsNotFound(err)
	}, 30*time.Second, 500*time.Millisecond, "%s: %v", what, err)
	require.Eventually(t, func() bool {
		got := &corev1.Pod{}
		err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got)
		return apierrors.IsNotFound(err) || err == nil && got.DeletionTimestamp != nil
	}, 30*time.Second, 250*time.Millisecond, "%s: the pod goes", what)
}

// stays asserts that the pod's delete (or eviction) is refused.
func stays(t *testing.T, pod *corev1.Pod, eviction bool, what string) error {
	t.Helper()
	err := deleteOrEvict(pod, eviction)
	require.Error(t, err, what)
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got), what)
	assert.Nil(t, got.DeletionTimestamp, what)
	return err
}

func deleteOrEvict(pod *corev1.Pod, eviction bool) error {
	ctx := context.Background()
	if eviction {
		return cs.PolicyV1().Evictions(pod.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}})
	}
	return cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{})
}

// signalPolicyHolds asserts that the chart's admission policy, which no
// row touches, still refuses a pod that forges a busy runner's budget
// label (a dry run: nothing is created if it did not).
func signalPolicyHolds(t *testing.T, ns string) {
	t.Helper()
	forged := podtest.Plain(ns, "forged").Obj()
	forged.UID = ""
	forged.Labels = map[string]string{runnerpod.BudgetLabel: "uid-of-a-busy-runner"}
	err := admin.Create(context.Background(), forged, client.DryRunAll)
	require.Error(t, err, "the signal policy stays")
	assert.Contains(t, err.Error(), runnerpod.BudgetLabel)
}
