//go:build e2e

package api

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/responder"
)

// Eviction requests (lifecycle.k8s.io/v1alpha1) through the real API
// server and kube-controller-manager's evictionrequest controller and
// default evictor, where make compat runs them (1.38, the gate on:
// apitest.StartCluster). The default suite's server has none: these skip.

// defaultEvictor is kube-controller-manager's default responder, which
// evicts through pods/eviction under its own ServiceAccount.
const defaultEvictor = "system:serviceaccount:kube-system:imperative-eviction-responder-controller"

// requester is who asks for these tests' evictions.
const requester = "acme.io/drainer"

func requireEvictionRequests(t *testing.T) dynamic.Interface {
	t.Helper()
	if !responder.ServedBy(cs.Discovery()) {
		t.Skipf("needs eviction requests (lifecycle.k8s.io/v1alpha1, gate EvictionRequestAPI, from %s; make compat runs them)", apitest.EvictionRequestsSince)
	}
	dyn, err := dynamic.NewForConfig(adminCfg)
	require.NoError(t, err)
	return dyn
}

// requestEviction is requester asking for pod's eviction, as request name.
func requestEviction(t *testing.T, dyn dynamic.Interface, pod *corev1.Pod, name string) {
	t.Helper()
	er := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": responder.GroupVersion.String(), "kind": "EvictionRequest",
		"metadata": map[string]any{"name": name, "namespace": pod.Namespace},
		"spec": map[string]any{
			"target":    map[string]any{"pod": map[string]any{"name": pod.Name, "uid": string(pod.UID)}},
			"requester": requester, "intent": "Eviction",
		},
	}}
	_, err := dyn.Resource(responder.EvictionRequests).Namespace(pod.Namespace).Create(context.Background(), er, metav1.CreateOptions{})
	require.NoError(t, err)
}

// evictionOf is the Eviction the controller made for pod, nil before it
// has.
func evictionOf(t *testing.T, dyn dynamic.Interface, pod *corev1.Pod) *responder.Eviction {
	t.Helper()
	list, err := dyn.Resource(responder.Evictions).Namespace(pod.Namespace).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	for i := range list.Items {
		e, err := responder.FromUnstructured(&list.Items[i])
		require.NoError(t, err)
		if p := e.Spec.Target.Pod; p != nil && p.UID == pod.UID {
			return e
		}
	}
	return nil
}

// stateOf is responder name's state in pod's Eviction, "" before there is one.
func stateOf(t *testing.T, dyn dynamic.Interface, pod *corev1.Pod, name string) responder.State {
	t.Helper()
	e := evictionOf(t, dyn, pod)
	if e == nil {
		return ""
	}
	for _, r := range e.Status.TargetResponders {
		if r.Name == name {
			return r.State
		}
	}
	return ""
}

// respondersOf is the pod's spec.evictionResponders as the API server
// keeps them (the Pod type of this build has no such field).
func respondersOf(t *testing.T, dyn dynamic.Interface, pod *corev1.Pod) []any {
	t.Helper()
	u, err := dyn.Resource(corev1.SchemeGroupVersion.WithResource("pods")).Namespace(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	rs, _, _ := unstructured.NestedSlice(u.Object, "spec", "evictionResponders")
	return rs
}

// busyARCRunnerOn is an ARC scale-set runner on node running job-7 for two
// minutes, its EphemeralRunner with ARC's finalizers.
func busyARCRunnerOn(t *testing.T, ns, name, node string) arcRunner {
	t.Helper()
	ctx := context.Background()
	er := apitest.EphemeralRunner(ns, name)
	er.SetFinalizers([]string{arcscaleset.RegistrationFinalizer, arcFinalizer})
	require.NoError(t, as(t, arcController).Create(ctx, er))
	t.Cleanup(func() {
		_ = admin.Patch(ctx, er.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	w := podtest.ARCScaleSet(ns, name).Node(node).RunningSince("runner", time.Now().Add(-2*time.Minute))
	w.OwnerReferences[0].UID = er.GetUID()
	r := arcRunner{er: er, pod: create(t, as(t, arcController), w.Obj())}
	r.assignJob(t)
	return r
}

func TestAnEvictionRequestForAnIdleRunnerEvictsItAtOnce(t *testing.T) {
	dyn := requireEvictionRequests(t)
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-er-idle")
	idle := idleARCRunnerOn(t, ns, "idle", n.Name)
	web := create(t, nil, podtest.Plain(ns, "web").Node(n.Name).Obj())
	assert.Equal(t, []any{map[string]any{"name": responder.Name, "priority": int64(responder.Priority)}}, respondersOf(t, dyn, idle),
		"the injector names runnerguard on a runner pod")
	assert.Empty(t, respondersOf(t, dyn, web), "and on no other pod")

	requestEviction(t, dyn, idle, "drain-idle")
	eventually(t, func() bool { return gone(t, idle) }, "the idle runner evicted")
	e := evictionOf(t, dyn, idle)
	require.NotNil(t, e)
	assert.Equal(t, responder.Completed, e.Turn(), "runnerguard completed its turn")
	require.NotNil(t, e.Own().Message)
	assert.Contains(t, *e.Own().Message, "runnerguard: lets runner pod "+ns+"/idle go: ")

	rec := oneDeath(t, idle)
	assert.Equal(t, defaultEvictor, rec.DeletedBy, "the default evictor carried it out")
	require.NotNil(t, rec.EvictionRequest, "the record names the eviction request")
	assert.Equal(t, []string{"drain-idle"}, rec.EvictionRequest.Names)
	assert.Equal(t, []string{requester}, rec.EvictionRequest.Requesters)
	assert.Nil(t, rec.EvictionRequest.HeldFor, "let go at once")
}

func TestAnEvictionRequestForABusyRunnerWaitsForItsJobThenEvictsIt(t *testing.T) {
	dyn := requireEvictionRequests(t)
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-er-busy")
	r := busyARCRunnerOn(t, ns, "busy", n.Name)

	requestEviction(t, dyn, r.pod, "drain-busy")
	var msg string
	eventually(t, func() bool {
		e := evictionOf(t, dyn, r.pod)
		if e == nil || e.Turn() != responder.Active || e.Own() == nil || e.Own().HeartbeatTime == nil || e.Own().Message == nil {
			return false
		}
		msg = *e.Own().Message
		return time.Since(e.Own().HeartbeatTime.Time) < responder.HeartbeatEvery
	}, "runnerguard active on the Eviction with a fresh heartbeat")
	t.Logf("runnerguard's message: %s", msg)
	for _, want := range []string{`runner container "runner" of pod ` + ns + "/busy (arc-scale-set) is busy with job #job-7", "running for 2m", "the eviction waits for the job to end", "protection to end at"} {
		assert.Contains(t, msg, want)
	}
	// It holds: the default evictor never gets its turn while the job runs.
	time.Sleep(3 * time.Second)
	assert.True(t, alive(t, r.pod), "the busy runner stays")
	assert.Equal(t, responder.Inactive, stateOf(t, dyn, r.pod, "imperative-eviction.k8s.io/evictor"))

	// The job ends: ARC deletes the EphemeralRunner and, once the service
	// removed the runner, its registration finalizer.
	r.deleteEphemeralRunner(t, arcController)
	r.removeFinalizer(t, arcscaleset.RegistrationFinalizer)
	eventually(t, func() bool { return gone(t, r.pod) }, "the runner evicted once its job ended")
	e := evictionOf(t, dyn, r.pod)
	require.NotNil(t, e)
	assert.Equal(t, responder.Completed, e.Turn())

	rec := oneDeath(t, r.pod)
	assert.Equal(t, string(death.JobEnded), rec.Class, "the job had ended")
	assert.Equal(t, defaultEvictor, rec.DeletedBy)
	require.NotNil(t, rec.EvictionRequest)
	assert.Equal(t, []string{"drain-busy"}, rec.EvictionRequest.Names)
	assert.Equal(t, []string{requester}, rec.EvictionRequest.Requesters)
	require.NotNil(t, rec.EvictionRequest.HeldFor, "held for the job")
	assert.Positive(t, rec.EvictionRequest.HeldFor.Duration)
	eventually(t, func() bool {
		return slices.ContainsFunc(podEvents(t, r.pod), func(e eventsv1.Event) bool {
			return strings.Contains(e.Note, "carrying out eviction request drain-busy by "+requester)
		})
	}, "the death's Event names the request")
}

func TestAWithdrawnEvictionRequestLeavesTheRunnerRunning(t *testing.T) {
	dyn := requireEvictionRequests(t)
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-er-withdrawn")
	busy := create(t, nil, podtest.Runner(ns, "busy").Node(n.Name).RunningSince("runner", time.Now().Add(-3*time.Minute)).Obj())

	requestEviction(t, dyn, busy, "drain-withdrawn")
	eventually(t, func() bool {
		e := evictionOf(t, dyn, busy)
		return e != nil && e.Turn() == responder.Active && e.Own() != nil && e.Own().HeartbeatTime != nil
	}, "runnerguard holds the busy runner")

	patch := []byte(`{"spec":{"intent":"Withdrawn"}}`)
	_, err := dyn.Resource(responder.EvictionRequests).Namespace(ns).Patch(context.Background(), "drain-withdrawn", types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
	eventually(t, func() bool { return stateOf(t, dyn, busy, responder.Name) == responder.Canceled }, "runnerguard's turn canceled")
	time.Sleep(3 * time.Second)
	assert.True(t, alive(t, busy), "the runner runs on")
	assert.Equal(t, responder.Inactive, stateOf(t, dyn, busy, "imperative-eviction.k8s.io/evictor"), "and no one else evicts it")
	e := evictionOf(t, dyn, busy)
	require.NotNil(t, e)
	assert.Nil(t, e.Own().CompletionTime, "runnerguard did not complete a canceled turn")
	assert.True(t, strings.HasPrefix(*e.Own().Message, "runnerguard: "), "its last word stays")
}

func TestDrainAsksForEachRunnerThroughEvictionRequestsAndFollowsTheirResponders(t *testing.T) {
	dyn := requireEvictionRequests(t)
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-er-drain")
	idle := idleARCRunnerOn(t, ns, "idle", n.Name)
	web := create(t, nil, podtest.Plain(ns, "web").Node(n.Name).Obj())
	busy := create(t, nil, podtest.Runner(ns, "busy").Node(n.Name).RunningSince("runner", time.Now().Add(-3*time.Minute)).Obj())

	wait, said := startDrain(t, n.Name, "--force", "--timeout=2m", "--report-node-conditions")
	eventually(t, func() bool { return gone(t, idle) && gone(t, web) }, "the idle runner and the other pod go at once")
	eventually(t, func() bool { return nodeCondition(t, n.Name, drain.ConditionDrainInProgress) == corev1.ConditionTrue },
		"the node says its drain is in progress")
	eventually(t, func() bool {
		return strings.Contains(said(), ns+"/busy: "+responder.Name+`: runnerguard: runner container "runner" of pod `+ns+"/busy (generic) is busy")
	}, "the drain shows runnerguard's word on the busy runner")
	assert.True(t, alive(t, busy), "the busy runner is held")
	_, err := dyn.Resource(responder.EvictionRequests).Namespace(ns).Get(context.Background(), drain.RequestName("busy"), metav1.GetOptions{})
	require.NoError(t, err, "one request per runner pod")

	// The job ends: the runner exits, runnerguard lets it go, the default
	// evictor evicts it.
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(busy), got))
	stopContainers(context.Background(), got)
	out, code := wait()
	assert.Equal(t, drain.ExitDrained, code)
	assert.True(t, gone(t, busy))
	for _, want := range []string{
		"the API server serves eviction requests: each runner pod is asked for once, as " + drain.Requester,
		"evicting pod " + ns + "/idle (arc-scale-set): the EphemeralRunner has no job assigned (eviction request " + drain.RequestName("idle") + ")",
		"evicting pod " + ns + "/web",
		"asked for the eviction of " + ns + "/busy (eviction request " + drain.RequestName("busy") + "): its responders hold it while its job runs",
		"waiting for " + ns + "/busy: generic, job -, running for 3m",
		"evicting pod " + ns + "/busy (generic): ",
		"drained",
	} {
		assert.Contains(t, out, want)
	}
	_, err = dyn.Resource(responder.EvictionRequests).Namespace(ns).Get(context.Background(), drain.RequestName("busy"), metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "the drain removes its requests once their pods are gone: %v", err)
	assert.Equal(t, corev1.ConditionTrue, nodeCondition(t, n.Name, drain.ConditionDrained), "the node says it is drained")
	assert.Equal(t, corev1.ConditionFalse, nodeCondition(t, n.Name, drain.ConditionDrainInProgress))

	rec := oneDeath(t, idle)
	require.NotNil(t, rec.EvictionRequest)
	assert.Equal(t, []string{drain.RequestName("idle")}, rec.EvictionRequest.Names)
	assert.Equal(t, []string{drain.Requester}, rec.EvictionRequest.Requesters)
}

// nodeCondition is the status of node's condition typ, "" when it has none.
func nodeCondition(t *testing.T, node string, typ corev1.NodeConditionType) corev1.ConditionStatus {
	t.Helper()
	n := &corev1.Node{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKey{Name: node}, n))
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func TestAnEvictionRequestForABusyRunnerEndsAtItsNodesDrainDeadline(t *testing.T) {
	dyn := requireEvictionRequests(t)
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-er-deadline")
	busy := create(t, nil, podtest.Runner(ns, "busy").Node(n.Name).RunningSince("runner", time.Now().Add(-time.Minute)).Obj())
	// A few seconds ahead (RFC3339 keeps whole seconds): the request is
	// answered before it, however slow the machine, and the test waits
	// little.
	at := time.Now().Add(6 * time.Second).Truncate(time.Second)
	require.NoError(t, setDeadline(as(t, "alice@example.com"), n.Name, at, "alice@example.com"))

	requestEviction(t, dyn, busy, "drain-deadline")
	var held *responder.ResponderStatus
	eventually(t, func() bool {
		e := evictionOf(t, dyn, busy)
		if e == nil || e.Turn() != responder.Active || e.Own() == nil || e.Own().Message == nil {
			return false
		}
		held = e.Own()
		return true
	}, "runnerguard holds the busy runner")
	assert.Contains(t, *held.Message, "node "+n.Name+"'s drain deadline (runnerguard.io/drain-deadline), set by alice@example.com")
	require.NotNil(t, held.ExpectedCompletionTime)
	assert.True(t, at.Equal(held.ExpectedCompletionTime.Time), "it expects to complete at the node's deadline %s, not %s", at, held.ExpectedCompletionTime)

	eventually(t, func() bool { return gone(t, busy) }, "the runner evicted at the deadline")
	assert.False(t, time.Now().Before(at), "not before the deadline")
	r := oneDeath(t, busy)
	assert.Equal(t, defaultEvictor, r.DeletedBy)
	assert.Equal(t, "node-drain-deadline", r.DeleteRule)
	assert.Equal(t, "alice@example.com", r.StartedBy)
	require.NotNil(t, r.EvictionRequest)
	assert.Equal(t, []string{"drain-deadline"}, r.EvictionRequest.Names)
}
