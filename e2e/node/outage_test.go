//go:build node

package node

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
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

// webhookOnly makes pod one that only the injector's webhook instruments:
// where the chart installs the injection policy (1.36 and later), the
// policy hands it to the webhook (an opt-out that is not a boolean, which
// the webhook instruments, with a warning).
func webhookOnly(pod *corev1.Pod) *corev1.Pod {
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[runnerpod.Inject] = "maybe"
	return pod
}

// webhookProbe is a runner pod only the webhook instruments.
func webhookProbe(ns string) *corev1.Pod { return webhookOnly(runnerPod(ns, "probe", "64Mi")) }

// waitInjection waits until a dry-run runner pod comes back injected by
// the webhook: the API server reaches a webhook pod again.
func waitInjection(t *testing.T, ns string) {
	t.Helper()
	require.Eventually(t, func() bool {
		pod := webhookProbe(ns)
		return admin.Create(context.Background(), pod, client.DryRunAll) == nil && injected(pod)
	}, time.Minute, 500*time.Millisecond, "injection resumes")
}

// injectPolicyInstalled reports whether the chart installed the injection
// as a MutatingAdmissionPolicy (inject.policy: auto, on 1.36 and later).
func injectPolicyInstalled(t *testing.T) bool {
	t.Helper()
	err := admin.Get(context.Background(), client.ObjectKey{Name: releaseName + "-inject"}, &admissionregistrationv1.MutatingAdmissionPolicy{})
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return false
	}
	require.NoError(t, err)
	return true
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

	t.Run("a runner pod is still created, instrumented only by the API server's policy", func(t *testing.T) {
		pod := runnerPod(ns, "new", "64Mi", "job", "1")
		require.NoError(t, admin.Create(ctx, pod), "the injector's failure policy is Ignore")
		policy := injectPolicyInstalled(t)
		assert.Equal(t, policy, injected(pod), "the sidecar, where the injection policy is installed")
		if policy {
			assert.Equal(t, "policy", pod.Annotations["runnerguard.io/inject-by"])
		}
		handed := webhookProbe(ns)
		handed.Name = "handed"
		require.NoError(t, admin.Create(ctx, handed))
		assert.False(t, injected(handed), "a pod only the webhook instruments is created without the sidecar")
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
			got := &corev1.Pod{}
			return admin.Get(context.Background(), client.ObjectKeyFromObject(p), got) == nil && got.Labels[runnerpod.BudgetLabel] == recorder.BudgetHeld &&
				admin.Get(context.Background(), client.ObjectKey{Namespace: p.Namespace, Name: recorder.BudgetName}, &policyv1.PodDisruptionBudget{}) == nil
		}, 90*time.Second, 200*time.Millisecond, "the leader holds the busy runner %s/%s by its namespace's budget", p.Namespace, p.Name)
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

// unreachableSelector is what the release's Service selects while the test
// keeps the webhook pods out of the API server's reach: no pod carries it.
var unreachableSelector = map[string]string{"e2e.runnerguard.io/unreachable": "true"}

// cutOff points the release's Service at no pod, as a broken Service (or
// a NetworkPolicy that drops the API server's calls) would: the webhook
// pods keep running and their leader leading, but the API server, which
// dials the Service's endpoints, reaches none of them. It waits until a
// dry-run runner pod comes back without the sidecar (the injector's
// failure policy Ignore: the API server reached no injector) and returns
// the webhook pods that run, and reconnect, which puts the Service back
// (idempotent; also run at cleanup) and waits until injection resumes in
// probeNS.
func cutOff(t *testing.T, probeNS string) (running map[string]bool, reconnect func()) {
	t.Helper()
	ctx := context.Background()
	running = readyWebhookPods(t)
	require.Len(t, running, 2, "the chart's two webhook pods are ready")
	svc := &corev1.Service{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: releaseName}, svc))
	saved := maps.Clone(svc.Spec.Selector)
	require.NotEmpty(t, saved)
	setSelector := func(sel map[string]string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s := &corev1.Service{}
			if err := admin.Get(ctx, client.ObjectKeyFromObject(svc), s); err != nil {
				return err
			}
			s.Spec.Selector = sel
			return admin.Update(ctx, s)
		})
	}
	var once sync.Once
	reconnect = func() {
		t.Helper()
		once.Do(func() {
			require.NoError(t, setSelector(saved), "the Service selects the webhook pods again")
			waitInjection(t, probeNS)
		})
	}
	t.Cleanup(reconnect)
	require.NoError(t, setSelector(unreachableSelector))
	require.Eventually(t, func() bool {
		pod := webhookProbe(probeNS)
		return admin.Create(ctx, pod, client.DryRunAll) == nil && !injected(pod)
	}, 2*time.Minute, 500*time.Millisecond, "the API server no longer reaches the injector")
	return running, reconnect
}

// readyWebhookPods is the names of the release's ready webhook pods, not
// being deleted.
func readyWebhookPods(t *testing.T) map[string]bool {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, admin.List(context.Background(), pods, client.InNamespace(releaseNamespace),
		client.MatchingLabels{"app.kubernetes.io/instance": releaseName}))
	ready := map[string]bool{}
	for _, p := range pods.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				ready[p.Name] = true
			}
		}
	}
	return ready
}

// stillRun asserts that the webhook pods that ran when the API server lost
// them still run, ready, none restarted or replaced, and that one of them
// holds the leader's Lease.
func stillRun(t *testing.T, running map[string]bool) {
	t.Helper()
	assert.Equal(t, running, readyWebhookPods(t), "the same webhook pods run, ready")
	pods := &corev1.PodList{}
	require.NoError(t, admin.List(context.Background(), pods, client.InNamespace(releaseNamespace),
		client.MatchingLabels{"app.kubernetes.io/instance": releaseName}))
	for _, p := range pods.Items {
		for _, s := range p.Status.ContainerStatuses {
			assert.Zero(t, s.RestartCount, "%s/%s %s is not restarted", p.Namespace, p.Name, s.Name)
		}
	}
	lease := &coordinationv1.Lease{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: "runnerguard-watcher"}, lease))
	holder, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
	assert.True(t, running[holder], "the leader's Lease is held by a running webhook pod, not %q", holder)
}

// evictOnce asks for the pod's eviction once. A disruption budget's 429
// carries a Retry-After, which client-go's requests otherwise wait out ten
// times before they return the refusal.
func evictOnce(pod *corev1.Pod) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	return cs.CoreV1().RESTClient().Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		SubResource("eviction").Body(ev).MaxRetries(0).Do(context.Background()).Error()
}

// heldByBudget waits until the pod's eviction is refused by its
// disruption budget (the API server applies a budget a moment after its
// write), and asserts the pod stays.
func heldByBudget(t *testing.T, pod *corev1.Pod, what string) {
	t.Helper()
	var err error
	require.Eventually(t, func() bool {
		err = evictOnce(pod)
		return apierrors.IsTooManyRequests(err) && strings.Contains(err.Error(), "disruption budget")
	}, 2*time.Minute, 500*time.Millisecond, "%s: the eviction is refused by the budget (last: %v)", what, err)
	alive(t, pod, what)
}

// deleteFailsClosed waits until a dry run of the pod's delete is refused
// for want of the guard (the enforce delete webhook, Fail, unreachable):
// the API server takes up a namespace's mode and the registration a
// moment after their write. A dry run is decided as the delete would be
// (the guard's side effects are NoneOnDryRun), and removes nothing if it
// were let through.
func deleteFailsClosed(t *testing.T, pod *corev1.Pod, what string) {
	t.Helper()
	var err error
	require.Eventually(t, func() bool {
		err = admin.Delete(context.Background(), pod.DeepCopy(), client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "failed calling webhook")
	}, 2*time.Minute, 500*time.Millisecond, "%s: the delete fails closed (last: %v)", what, err)
	alive(t, pod, what)
}

// letThrough waits until the pod's delete (or eviction) is let through,
// tried until the API server applies the row's change, and the pod goes.
func letThrough(t *testing.T, pod *corev1.Pod, eviction bool, what string) {
	t.Helper()
	var err error
	require.Eventually(t, func() bool {
		if eviction {
			err = evictOnce(pod)
		} else {
			err = cs.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
		}
		return err == nil || apierrors.IsNotFound(err)
	}, 2*time.Minute, 500*time.Millisecond, "%s (last: %v)", what, err)
	require.Eventually(t, func() bool {
		got := &corev1.Pod{}
		err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got)
		return apierrors.IsNotFound(err) || err == nil && got.DeletionTimestamp != nil
	}, 2*time.Minute, 250*time.Millisecond, "%s: the pod goes", what)
}

// alive asserts that the pod is there, not being deleted.
func alive(t *testing.T, pod *corev1.Pod, what string) {
	t.Helper()
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got), what)
	assert.Nil(t, got.DeletionTimestamp, what)
}

// protection is what the leader keeps on a busy runner pod, as the API
// server has it: its budget label, its namespace's budget and its
// cluster-autoscaler mark.
type protection struct {
	labelled, budget bool
	mark             string
}

func protectionOf(t *testing.T, pod *corev1.Pod) protection {
	t.Helper()
	ctx := context.Background()
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
	err := admin.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: recorder.BudgetName}, &policyv1.PodDisruptionBudget{})
	if !apierrors.IsNotFound(err) {
		require.NoError(t, err)
	}
	return protection{labelled: got.Labels[runnerpod.BudgetLabel] == recorder.BudgetHeld, budget: err == nil,
		mark: got.Annotations[runnerpod.ClusterAutoscalerSafeEvict]}
}

// leaderLets waits until the leader has judged each pod free to go: its
// budget label removed (the leader labels a pod held only once its
// namespace's budget is in place), the budget gone (the row deleted it,
// and the leader does not put it back) and, unless warn
// (a warn namespace's busy runner stays marked busy, without a budget),
// the pod marked safe to evict, which the leader writes only once it
// obeys the off switch.
func leaderLets(t *testing.T, warn bool, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		var got protection
		require.Eventually(t, func() bool {
			got = protectionOf(t, p)
			return !got.labelled && !got.budget && (warn || got.mark == "true")
		}, 2*time.Minute, 500*time.Millisecond, "the leader lets the busy runner %s/%s go (%+v)", p.Namespace, p.Name, got)
	}
}

// staysReleased asserts, at a later moment than leaderLets, that the
// leader has put no protection back while the row holds: no budget of
// runnerguard's in the namespaces, none of the pods labelled for one.
func staysReleased(t *testing.T, warn bool, namespaces []string, pods ...*corev1.Pod) {
	t.Helper()
	for _, ns := range namespaces {
		list := &policyv1.PodDisruptionBudgetList{}
		require.NoError(t, admin.List(context.Background(), list, client.InNamespace(ns),
			client.MatchingLabels{"app.kubernetes.io/managed-by": recorder.BudgetManagedBy}))
		assert.Empty(t, list.Items, "the leader puts no budget back in %s while the row holds", ns)
	}
	for _, p := range pods {
		got := protectionOf(t, p)
		assert.False(t, got.labelled || got.budget, "%s/%s stays without a budget: %+v", p.Namespace, p.Name, got)
		if !warn {
			assert.Equal(t, "true", got.mark, "%s/%s stays marked safe to evict", p.Namespace, p.Name)
		}
	}
}

// noBudgetRightAfter asserts that, the moment a row has run, the
// namespaces hold none of runnerguard's budgets: the leader reads the
// registration and the namespace afresh before it would put a removed
// budget back, so it never undoes the row's own deletion of them.
func noBudgetRightAfter(t *testing.T, namespaces ...string) {
	t.Helper()
	for _, ns := range namespaces {
		list := &policyv1.PodDisruptionBudgetList{}
		require.NoError(t, admin.List(context.Background(), list, client.InNamespace(ns),
			client.MatchingLabels{"app.kubernetes.io/managed-by": recorder.BudgetManagedBy}))
		assert.Empty(t, list.Items, "right after the row, no budget of runnerguard's in %s", ns)
	}
}

// protectedAgain waits until the leader protects each pod again (its
// budget label, its budget, its mark busy), then asserts the API server
// holds it: its eviction refused by the budget, its delete failing closed.
func protectedAgain(t *testing.T, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		var got protection
		require.Eventually(t, func() bool {
			got = protectionOf(t, p)
			return got.labelled && got.budget && got.mark == "false"
		}, 2*time.Minute, 500*time.Millisecond, "the leader protects the busy runner %s/%s again (%+v)", p.Namespace, p.Name, got)
		heldByBudget(t, p, "protection is back")
		deleteFailsClosed(t, p, "protection is back")
	}
}

// With runnerguard's pods running, ready and leading, but out of the API
// server's reach (its Service selects no pod, as a broken Service or a
// NetworkPolicy would leave it), the busy runners' budgets hold their
// evictions and the guard's failure policy Fail their deletes. Each row of
// the README's emergency box, run as written, then lets busy runners go
// where it says: the leader, which still runs, obeys the row (it lifts the
// budgets and puts none back while the row holds), and protects the busy
// runners left again once the row is undone.
func TestWithTheWebhookUnreachableEachRowLetsBusyRunnersGoWhileItsPodsRun(t *testing.T) {
	rows := emergencyRows(t)
	require.Len(t, rows, 3, "each row of the README's emergency box has its proof below")
	control := newNamespace(t)
	rowNS, rowAll, rowGlass := newNamespace(t), newNamespace(t), newNamespace(t)
	// In the namespace no row names: one busy runner kept to the end, one
	// evicted and one deleted by the rows for every namespace.
	kept := start(t, runnerPod(control, "busy", "64Mi", "job", "3600"))
	evictedAll := start(t, runnerPod(control, "busy-2", "64Mi", "job", "3600"))
	deletedAll := start(t, runnerPod(control, "busy-3", "64Mi", "job", "3600"))
	// In each row's namespace: one busy runner deleted, one evicted, one
	// kept to see protection return.
	type trio struct{ deleted, evicted, kept *corev1.Pod }
	trios := map[string]trio{}
	all := []*corev1.Pod{kept, evictedAll, deletedAll}
	for _, ns := range []string{rowNS, rowAll, rowGlass} {
		r := trio{start(t, runnerPod(ns, "busy", "64Mi", "job", "3600")),
			start(t, runnerPod(ns, "busy-2", "64Mi", "job", "3600")),
			start(t, runnerPod(ns, "busy-3", "64Mi", "job", "3600"))}
		trios[ns] = r
		all = append(all, r.deleted, r.evicted, r.kept)
	}
	for _, p := range all {
		require.True(t, injected(p), "%s/%s is instrumented", p.Namespace, p.Name)
	}
	waitBudgets(t, all...)

	restore := keepRegistration(t)
	t.Cleanup(restore)
	running, reconnect := cutOff(t, control)

	t.Run("unreachable, with no row run, the budgets and the guard's failure policy hold busy runners", func(t *testing.T) {
		stillRun(t, running)
		heldByBudget(t, kept, "the eviction failure policy is Ignore; the budget holds")
		deleteFailsClosed(t, kept, "the guard's DELETE failure policy is Fail")
		heldByBudget(t, trios[rowNS].evicted, "in the namespace the first row names too")
	})

	t.Run("the row for one namespace lets its busy runners go while the leader runs, and only its", func(t *testing.T) {
		r := trios[rowNS]
		rowFor(t, rows, "one namespace").run(t, rowNS)
		noBudgetRightAfter(t, rowNS)
		leaderLets(t, true, r.deleted, r.evicted, r.kept)
		letThrough(t, r.deleted, false, "a busy runner's delete in the named namespace")
		letThrough(t, r.evicted, true, "and a busy runner's eviction")
		heldByBudget(t, kept, "another namespace's busy runner keeps its eviction held by its budget")
		deleteFailsClosed(t, kept, "and its delete refused")
		stillRun(t, running)
		staysReleased(t, true, []string{rowNS}, r.kept)

		emergencyRow{commands: []string{"kubectl label namespace NS " + runnerpod.ModeLabel + "-"}}.run(t, rowNS)
		protectedAgain(t, r.kept)
		stillRun(t, running)
	})

	// A row for every namespace: its own namespace's busy runners go, and
	// one elsewhere (other: evicted, or deleted), while the leader runs;
	// undone, the busy runners kept are protected again.
	everywhere := func(t *testing.T, row, ns string, other *corev1.Pod, evictOther bool, keptElsewhere ...*corev1.Pod) {
		r := trios[ns]
		rowFor(t, rows, row).run(t, "")
		noBudgetRightAfter(t, control, rowNS, rowAll, rowGlass)
		held := append([]*corev1.Pod{r.kept}, keptElsewhere...)
		leaderLets(t, false, append([]*corev1.Pod{r.deleted, r.evicted, other}, held...)...)
		letThrough(t, r.deleted, false, "a busy runner's delete")
		letThrough(t, r.evicted, true, "and a busy runner's eviction")
		letThrough(t, other, evictOther, "in every namespace")
		signalPolicyHolds(t, ns)
		stillRun(t, running)
		staysReleased(t, false, []string{control, rowNS, rowAll, rowGlass}, held...)

		restore()
		protectedAgain(t, held...)
		stillRun(t, running)
	}
	t.Run("the row for every namespace lets busy runners go everywhere while the leader runs", func(t *testing.T) {
		everywhere(t, "everywhere must go", rowAll, evictedAll, true, kept, trios[rowNS].kept, trios[rowGlass].kept)
	})
	t.Run("break-glass lets busy runners go everywhere while the leader runs", func(t *testing.T) {
		everywhere(t, "break-glass", rowGlass, deletedAll, false, kept, trios[rowNS].kept, trios[rowAll].kept)
	})

	t.Run("reachable again, the guard answers for itself", func(t *testing.T) {
		reconnect()
		stillRun(t, running)
		var err error
		require.Eventually(t, func() bool {
			err = admin.Delete(context.Background(), kept.DeepCopy(), client.DryRunAll)
			return err != nil && !strings.Contains(err.Error(), "failed calling webhook")
		}, 2*time.Minute, 500*time.Millisecond, "the guard, not its failure policy, refuses (last: %v)", err)
		alive(t, kept, "the busy runner stays")
	})
}
