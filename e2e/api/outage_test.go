//go:build e2e

package api

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// outageLabel opts a namespace into the outage installation, a second
// runnerguard beside the suite's whose process the test stops.
const outageLabel = "runnerguard-outage"

// outage is an installation whose webhook process can be stopped: its own
// server (its own leader, no leader election) and its own registration, as
// the chart renders it with guard.rollout=enforce and the chart's failure
// policies, acting in the namespaces labelled outageLabel.
type outage struct {
	srv  *apitest.Server
	objs *registration.Objects
}

func startOutage(t *testing.T) *outage {
	t.Helper()
	ctx := context.Background()
	// One installation per cluster: the suite's leader would judge the
	// outage namespaces as not its own and lift their marks and budgets.
	// The suite's replicas stop for the test (its tests run one at a time).
	server.Stop()
	replica.Stop()
	t.Cleanup(func() {
		require.NoError(t, server.Start(ctx), "restarting runnerguard")
		require.NoError(t, replica.Start(ctx), "restarting its replica")
	})
	cfg := configtest.Enforcing()
	name := "outage-runnerguard"
	srv, err := server.Variant(ctx, "runnerguard-outage.log", cfg, "--leader-elect=false",
		"--namespace-selector="+outageLabel+"=true", "--webhook-configuration="+name)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	o := srv.Options()
	o.Name = "outage"
	o.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{outageLabel: "true"}}
	o.DeleteFailurePolicy, o.EvictionFailurePolicy = "", "" // the chart's
	objs, err := registration.Render(cfg, o)
	require.NoError(t, err)
	require.Equal(t, name, objs.Validating.Name)
	// A second installation's ServiceAccount holds its own release's roles,
	// which name its own registration.
	_, err = apitest.GrantRelease(ctx, admin, o)
	require.NoError(t, err)
	require.NoError(t, admin.Create(ctx, objs.Validating))
	t.Cleanup(func() { _ = admin.Delete(ctx, objs.Validating) })
	return &outage{srv: srv, objs: objs}
}

// restore puts the registration back as the chart renders it.
func (o *outage) restore(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cur := o.objs.Validating.DeepCopy()
	err := admin.Get(ctx, client.ObjectKeyFromObject(cur), cur)
	if apierrors.IsNotFound(err) {
		fresh := o.objs.Validating.DeepCopy()
		fresh.ResourceVersion = ""
		require.NoError(t, admin.Create(ctx, fresh))
		return
	}
	require.NoError(t, err)
	cur.Webhooks = o.objs.Validating.Webhooks
	require.NoError(t, admin.Update(ctx, cur))
}

// outageNamespace makes a namespace of the outage installation.
func outageNamespace(t *testing.T, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "e2e-outage-" + strings.ToLower(rand.String(6)), Labels: map[string]string{outageLabel: "true"}}}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	require.NoError(t, admin.Create(context.Background(), ns))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
	return ns.Name
}

// outagePod creates pod with the runner label (as the injector would) and
// its status, without waiting for the suite's leader, which does not act
// in outage namespaces.
func outagePod(t *testing.T, w *podtest.Wrapper) *corev1.Pod {
	t.Helper()
	pod := w.Label(runnerpod.RunnerLabel, "true").Obj()
	status := pod.Status
	pod = pod.DeepCopy()
	pod.UID, pod.Status, pod.Spec.NodeName = "", corev1.PodStatus{}, "node-e2e"
	require.NoError(t, admin.Create(context.Background(), pod))
	t.Cleanup(func() { forceRemove(pod) })
	writeStatus(t, pod, status)
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), pod))
	return pod
}

// busyPod, idlePod and otherPod are a running runner, a runner whose
// container has not started in a running pod, and a pod that is no
// runner's.
func busyPod(t *testing.T, ns, name string) *corev1.Pod {
	return outagePod(t, podtest.Runner(ns, name).RunningSince("runner", time.Now().Add(-time.Minute)))
}

func idlePod(t *testing.T, ns, name string) *corev1.Pod {
	return outagePod(t, podtest.Runner(ns, name).Phase(corev1.PodRunning))
}

func otherPod(t *testing.T, ns, name string) *corev1.Pod {
	return outagePod(t, podtest.Plain(ns, name).Phase(corev1.PodRunning))
}

// budgetOf reports whether a budget holds the pod: its namespace's exists
// and the pod is labelled held.
func budgetOf(t *testing.T, pod *corev1.Pod) bool {
	t.Helper()
	now := &corev1.Pod{}
	err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), now)
	if apierrors.IsNotFound(err) || err == nil && now.UID != pod.UID {
		return false
	}
	require.NoError(t, err)
	if now.Labels[runnerpod.BudgetLabel] != recorder.BudgetHeld {
		return false
	}
	err = admin.Get(context.Background(), client.ObjectKey{Namespace: pod.Namespace, Name: recorder.BudgetName}, &policyv1.PodDisruptionBudget{})
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}

// annotationOf is the pod's annotation key as the API server has it.
func annotationOf(t *testing.T, pod *corev1.Pod, key string) string {
	t.Helper()
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	return got.Annotations[key]
}

// kubectl runs a real kubectl as cluster-admin and fails the test if it
// fails.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	out, errOut, code := runCmd(t, exec.Command(bin, args...), []string{"KUBECONFIG=" + adminKubeconfig})
	require.Zero(t, code, "kubectl %v: %s%s", args, out, errOut)
	return out
}

// patchFailurePolicies is the runbook's "webhook down" command for the
// enforce registrations of the webhook configuration name.
func patchFailurePolicies(t *testing.T, name string) {
	kubectl(t, "patch", "validatingwebhookconfiguration", name, "--type=json", "-p",
		`[{"op":"test","path":"/webhooks/0/name","value":"delete.guard.runnerguard.io"},`+
			`{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"},`+
			`{"op":"test","path":"/webhooks/1/name","value":"eviction.guard.runnerguard.io"},`+
			`{"op":"replace","path":"/webhooks/1/failurePolicy","value":"Ignore"}]`)
}

// takesEffect waits until a dry run of the pod's delete is let through
// (allowed) or refused: the API server sees a namespace's labels and the
// webhook configurations through its informers, a moment after the write
// that changed them, as an operator's next command may. A dry run is
// decided as the delete would be (the guard is called with it, and decides
// it alike) and changes nothing.
func takesEffect(t *testing.T, pod *corev1.Pod, allowed bool, what string) {
	t.Helper()
	eventually(t, func() bool {
		return (deletePod(admin, pod, client.DryRunAll) == nil) == allowed
	}, what)
}

// goes asserts that the pod's delete (or eviction) is let through.
func goes(t *testing.T, pod *corev1.Pod, eviction bool, what string) {
	t.Helper()
	var err error
	if eviction {
		err = evict(admin, pod, false)
	} else {
		err = deletePod(admin, pod)
	}
	require.NoError(t, err, what)
	assert.False(t, alive(t, pod), what)
}

// stays asserts that the pod's delete (or eviction) is refused.
func stays(t *testing.T, pod *corev1.Pod, eviction bool, what string) error {
	t.Helper()
	var err error
	if eviction {
		err = evictOnce(t, pod)
	} else {
		err = deletePod(admin, pod)
	}
	require.Error(t, err, what)
	assert.True(t, alive(t, pod), what)
	return err
}

// With every process of the installation gone, the API server decides
// alone: a busy runner in an enforce namespace keeps its eviction refused by
// its budget; an idle runner and a pod that is no runner's are evicted; a
// warn namespace refuses nothing. Each emergency row, run as written, then
// lets through what it says, and keeps what it says.
func TestWithTheWebhookGoneTheAPIServerDecidesAndEachEmergencyRowWorks(t *testing.T) {
	o := startOutage(t)
	vwc := o.objs.Validating.Name

	enforce := outageNamespace(t, nil)
	warn := outageNamespace(t, map[string]string{runnerpod.ModeLabel: "warn"})
	rowUp := outageNamespace(t, nil)
	rowDown := outageNamespace(t, nil)
	rowHelm := outageNamespace(t, map[string]string{"row": "helm"})
	rowGlass := outageNamespace(t, nil)

	busy, busy2 := busyPod(t, enforce, "busy"), busyPod(t, enforce, "busy-2")
	idle, other := idlePod(t, enforce, "idle"), otherPod(t, enforce, "other")
	warnBusy, warnBusy2 := busyPod(t, warn, "busy"), busyPod(t, warn, "busy-2")
	upBusy, upBusy2 := busyPod(t, rowUp, "busy"), busyPod(t, rowUp, "busy-2")
	downBusy, downBusy2 := busyPod(t, rowDown, "busy"), busyPod(t, rowDown, "busy-2")
	helmBusy, helmBusy2 := busyPod(t, rowHelm, "busy"), busyPod(t, rowHelm, "busy-2")
	glassBusy, glassBusy2 := busyPod(t, rowGlass, "busy"), busyPod(t, rowGlass, "busy-2")

	enforced := []*corev1.Pod{busy, busy2, upBusy, upBusy2, downBusy, downBusy2, helmBusy, helmBusy2, glassBusy, glassBusy2}
	for _, p := range enforced {
		eventually(t, func() bool { return budgetOf(t, p) }, "the leader keeps a budget on a busy runner in an enforce namespace")
	}
	eventually(t, func() bool { return annotationOf(t, warnBusy, caMark) == "false" }, "the leader judged the warn namespace's busy runner")
	assert.False(t, budgetOf(t, warnBusy), "no budget in a warn namespace")
	eventually(t, func() bool { return annotationOf(t, idle, caMark) == "true" }, "an idle runner is safe to evict")
	assert.False(t, budgetOf(t, idle), "no budget on an idle runner")

	t.Run("the webhook up but refusing what I need: the namespace to warn", func(t *testing.T) {
		takesEffect(t, upBusy, false, "the API server sees the registration")
		stays(t, upBusy, false, "enforce refuses a busy runner's delete")
		kubectl(t, "label", "namespace", rowUp, runnerpod.ModeLabel+"=warn", "--overwrite")
		eventually(t, func() bool { return !budgetOf(t, upBusy) && !budgetOf(t, upBusy2) }, "the leader lifts the namespace's budgets")
		takesEffect(t, upBusy, true, "the API server sees the namespace in warn")
		goes(t, upBusy, false, "a warn namespace's busy runner is deleted")
		goes(t, upBusy2, true, "and evicted")
	})

	o.srv.Stop()

	t.Run("with no row run, the budgets hold busy runners and the rest go", func(t *testing.T) {
		err := stays(t, busy, true, "a busy runner's eviction is refused by its budget")
		assert.Equal(t, int32(429), statusCode(err))
		assert.Contains(t, err.Error(), "disruption budget")
		stays(t, busy2, false, "a busy runner's delete fails closed in an enforce namespace")
		goes(t, idle, true, "an idle runner is evicted")
		goes(t, other, true, "a pod that is no runner's is evicted")
		goes(t, warnBusy, false, "a warn namespace's busy runner is deleted")
		goes(t, warnBusy2, true, "and evicted")
	})

	t.Run("the webhook down: the failure policies to Ignore, then the budgets", func(t *testing.T) {
		patchFailurePolicies(t, vwc)
		takesEffect(t, downBusy, true, "the API server sees the failure policy Ignore")
		goes(t, downBusy, false, "a busy runner's delete goes through")
		stays(t, downBusy2, true, "a busy runner's eviction is still held by its budget")
		kubectl(t, "delete", "pdb", "-n", rowDown, "-l", "app.kubernetes.io/managed-by=runnerguard")
		goes(t, downBusy2, true, "without its budget a busy runner is evicted")
		stays(t, busy, true, "a namespace the row did not name keeps its budgets")
		o.restore(t)
	})

	t.Run("Helm unreachable: every namespace to warn with kubectl", func(t *testing.T) {
		takesEffect(t, helmBusy, false, "the API server sees the registration back")
		stays(t, helmBusy, false, "the registration is back: enforce fails closed")
		kubectl(t, "label", "namespace", "-l", outageLabel+"=true,row=helm", runnerpod.ModeLabel+"=warn", "--overwrite")
		takesEffect(t, helmBusy, true, "the API server sees the namespace in warn")
		goes(t, helmBusy, false, "a busy runner's delete goes through")
		kubectl(t, "delete", "pdb", "-n", rowHelm, "-l", "app.kubernetes.io/managed-by=runnerguard")
		goes(t, helmBusy2, true, "and its eviction, without its budget")
	})

	t.Run("break-glass: the webhook configuration and the budgets, nothing else", func(t *testing.T) {
		stays(t, glassBusy, false, "enforce fails closed")
		kubectl(t, "delete", "validatingwebhookconfiguration", vwc)
		kubectl(t, "delete", "pdb", "-A", "-l", "app.kubernetes.io/managed-by=runnerguard")
		takesEffect(t, glassBusy, true, "the API server sees the registration gone")
		goes(t, glassBusy, false, "a busy runner's delete goes through")
		goes(t, glassBusy2, true, "and its eviction")
		goes(t, busy, true, "the budgets are gone everywhere")
	})
}

// Only runnerguard writes the label a budget selects its pod by: another
// pod carrying a busy runner's value would join its budget.
func TestOnlyRunnerguardWritesTheBudgetLabel(t *testing.T) {
	ns := newNamespace(t, nil)
	ctx := context.Background()
	forged := podtest.Plain(ns, "forged").Label(runnerpod.BudgetLabel, "uid-of-a-busy-runner").Obj()
	err := admin.Create(ctx, forged)
	require.Error(t, err, "not even cluster-admin creates a pod with the label")
	assert.Contains(t, err.Error(), "only runnerguard may set or change the label runnerguard.io/budget")

	pod := create(t, nil, podtest.Plain(ns, "plain").Obj())
	patch := []byte(`{"metadata":{"labels":{"` + runnerpod.BudgetLabel + `":"x"}}}`)
	err = as(t, "someone").Patch(ctx, pod, client.RawPatch("application/merge-patch+json", patch))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "runnerguard.io/budget")
	require.NoError(t, as(t, apitest.ServerUser).Patch(ctx, pod, client.RawPatch("application/merge-patch+json", patch)), "runnerguard may")
}

// A busy runner's budget is what holds its eviction while the webhook is
// down (failure policy Ignore): `edit` in the namespace may delete
// PodDisruptionBudgets, so the policy keeps runnerguard's to runnerguard,
// the garbage collector, the namespace controller and the override's
// holders; other budgets stay anyone's with the RBAC for them.
func TestOnlyRunnerguardAndTheOverridesHoldersChangeABusyRunnersBudget(t *testing.T) {
	ns := newNamespace(t, nil)
	ctx := context.Background()
	reaperSA := may(t, ns, serviceAccount(reaper), "edit").client(t)
	budget := recorder.Budget(ns)
	err := reaperSA.Create(ctx, budget.DeepCopy())
	require.Error(t, err, "edit cannot create runnerguard's budget")
	assert.Contains(t, err.Error(), "the busy runners' PodDisruptionBudget is runnerguard's")
	require.NoError(t, as(t, apitest.ServerUser).Create(ctx, budget.DeepCopy()), "runnerguard may")

	err = reaperSA.Delete(ctx, budget.DeepCopy())
	require.Error(t, err, "edit cannot delete it")
	assert.Contains(t, err.Error(), "runnerguard-override")
	patch := []byte(`{"spec":{"minAvailable":0}}`)
	err = reaperSA.Patch(ctx, budget.DeepCopy(), client.RawPatch("application/merge-patch+json", patch))
	require.Error(t, err, "nor weaken it")

	olga := person("olga@example.com")
	may(t, ns, olga, "edit")
	mayOverride(t, ns, olga)
	require.NoError(t, olga.client(t).Delete(ctx, budget.DeepCopy()), "the override's holder may, as the runbook's row for an outage does")

	other := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	require.NoError(t, reaperSA.Create(ctx, other), "a budget of the team's own is not runnerguard's")
	require.NoError(t, reaperSA.Delete(ctx, other))
}

// evictOnce asks for the pod's eviction once, as admin. A disruption
// budget's 429 carries a Retry-After, which client-go's requests otherwise
// wait out ten times before they return the refusal; a drain retries on its
// own, and the test wants the answer.
func evictOnce(t *testing.T, pod *corev1.Pod) error {
	t.Helper()
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	return cs.CoreV1().RESTClient().Post().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).
		SubResource("eviction").Body(ev).MaxRetries(0).Do(context.Background()).Error()
}

// unreachable points every webhook of the registration at a port nothing
// listens on: the installation's processes run (its leader leads), but the
// API server cannot reach them, as with a firewall rule or a broken CNI.
func unreachable(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: name}, vwc))
	for i := range vwc.Webhooks {
		cc := &vwc.Webhooks[i].ClientConfig
		cc.URL, cc.Service = ptr.To("https://127.0.0.1:1/unreachable"), nil
	}
	require.NoError(t, admin.Update(ctx, vwc))
}

// With runnerguard's processes running but out of the API server's reach,
// the README's "everywhere" row is obeyed by the leader too: once the
// enforce registration is set to Ignore where the chart rendered Fail, the
// leader keeps no budget and no busy mark where it acted, so busy runners
// are evicted; undoing the row brings protection back.
func TestWithTheWebhookUnreachableTheLeaderObeysTheOffSwitch(t *testing.T) {
	o := startOutage(t)
	vwc := o.objs.Validating.Name
	ns := outageNamespace(t, nil)
	busy, busy2 := busyPod(t, ns, "busy"), busyPod(t, ns, "busy-2")
	for _, p := range []*corev1.Pod{busy, busy2} {
		eventually(t, func() bool { return budgetOf(t, p) }, "the leader keeps a budget on a busy runner")
	}
	unreachable(t, vwc)
	// The API server takes up a changed configuration a moment later:
	// until then the webhook refuses, after it the budget does.
	eventually(t, func() bool {
		err := evictOnce(t, busy)
		return err != nil && strings.Contains(err.Error(), "disruption budget")
	}, "unreachable, a busy runner's eviction is still held by its budget")
	require.True(t, alive(t, busy))

	// The row as the README writes it: the switch, then the budgets at
	// once, sooner than the leader's periodic read of the registration.
	patchFailurePolicies(t, vwc)
	kubectl(t, "delete", "pdb", "-A", "-l", "app.kubernetes.io/managed-by=runnerguard")
	// A budget the leader put back would refuse this eviction: it reads
	// the registration afresh before it puts one back.
	require.NoError(t, evictOnce(t, busy), "a busy runner is evicted at once while the leader runs")
	eventually(t, func() bool { return !budgetOf(t, busy2) && annotationOf(t, busy2, caMark) == "true" },
		"the leader sees the switch: no budget, and the pod marked safe to evict")
	// The delete goes once the API server applies the patched policies
	// (a delete fails closed until then).
	eventually(t, func() bool { return deletePod(admin, busy2) == nil }, "and deleted")
	assert.False(t, alive(t, busy))
	assert.False(t, alive(t, busy2))

	late := busyPod(t, ns, "late")
	eventually(t, func() bool { return annotationOf(t, late, caMark) == "true" }, "a runner busy after the switch is judged released")
	assert.False(t, budgetOf(t, late), "and gets no budget")

	o.restore(t)
	eventually(t, func() bool { return budgetOf(t, late) && annotationOf(t, late, caMark) == "false" },
		"the row undone: the busy runner's budget and mark are back")
	stays(t, late, true, "and its eviction is refused again")
}

// With the injector unreachable (both runnerguard processes stopped: its
// failurePolicy is Ignore, so pods are admitted), the API server itself
// still records each runner pod's creator and credential: the job's owner
// is known, and a reaper is no owner. Served from Kubernetes 1.36.
func TestWithTheInjectorDownTheAPIServerStillRecordsTheCreator(t *testing.T) {
	if !creatorPolicyServed() {
		t.Skip("the API server serves no MutatingAdmissionPolicy (before 1.36)")
	}
	ctx := context.Background()
	ns := newNamespace(t, nil)
	const managerSA = "gitlab-runner"
	managerUser := serviceAccountIn(t, ns, managerSA)
	may(t, ns, serviceAccount(managerUser), "edit")
	manager := token(t, cs, ns, managerSA, nil)
	restart := stopRunnerguard(t)

	forged := podtest.GitLab(ns, "build-while-down").Annotate(runnerpod.CreatedBy, "system:serviceaccount:"+ns+":orphan-reaper").Obj()
	forged.UID = ""
	forged.Spec.NodeName = "node-e2e"
	require.NoError(t, manager.client(t).Create(ctx, forged))
	t.Cleanup(func() { forceRemove(forged) })
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(forged), got))
	assert.NotContains(t, got.Annotations, runnerpod.PresetAnnotation, "the injector was down")
	assert.Equal(t, managerUser, got.Annotations[runnerpod.CreatedBy], "the API server recorded the creator, over what the pod came with")
	assert.True(t, strings.HasPrefix(got.Annotations[runnerpod.CreatedWith], "JTI="), "and its credential: %q", got.Annotations[runnerpod.CreatedWith])
	from, ok := got.Annotations[runnerpod.CreatedFrom]
	assert.True(t, ok && from == "", "and that its token was bound to no pod: %q", from)

	// With the guard back, the pod's job has a known owner: its creator
	// ends it, with the token it created it with; a reaper may not.
	restart()
	setStatus(t, got, podtest.GitLab(ns, "x").RunningSince("build", time.Now().Add(-time.Minute)).Obj().Status)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	err := deletePod(reaperSA.client(t), got)
	assert.True(t, apierrors.IsForbidden(err), "a reaper is no owner: %v", err)
	require.NoError(t, deletePod(manager.client(t), got), "the recorded creator ends its job")
}

// stopRunnerguard stops both runnerguard processes, as if every pod of
// the release were gone, and returns what starts them again (once; also
// at the test's end).
func stopRunnerguard(t *testing.T) (restart func()) {
	t.Helper()
	server.Stop()
	replica.Stop()
	var once sync.Once
	restart = func() {
		once.Do(func() {
			require.NoError(t, server.Start(context.Background()), "restarting runnerguard")
			require.NoError(t, replica.Start(context.Background()), "restarting its replica")
		})
	}
	t.Cleanup(restart)
	return restart
}
