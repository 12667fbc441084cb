//go:build e2e

package api

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func busyRunner(ns, name string) *corev1.Pod {
	return podtest.Runner(ns, name).RunningSince("runner", time.Now().Add(-3*time.Minute)).Obj()
}

func hasEvent(t *testing.T, pod *corev1.Pod, typ, reason, noteContains string) func() bool {
	return func() bool {
		return slices.ContainsFunc(podEvents(t, pod), func(e eventsv1.Event) bool {
			return e.Type == typ && e.Reason == reason && strings.Contains(e.Note, noteContains)
		})
	}
}

func TestDeleteOfABusyRunnerIsRefusedOnceWithAWarningEvent(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, busyRunner(ns, "busy"))
	var err error
	n := calls(t, func() { err = deletePod(as(t, reaper), pod) })
	require.Error(t, err)
	assert.True(t, apierrors.IsForbidden(err), "403, got %v", err)
	// The refusal says what runs and for how long, that the job would be
	// lost, and what a deliberate drain takes: the permission the chart's
	// policy checks before anyone may set the annotation.
	for _, want := range []string{`runner container "runner" of pod ` + ns + `/busy (generic)`, "has been running for 3m", "removing the pod now would lose that job",
		fmt.Sprintf(`have someone granted the verb %q on %s.%s in %s (the ClusterRole %s in a default install) first run: kubectl annotate pod -n %s busy runnerguard.io/allow-delete="<reason>"`,
			runnerpod.OverrideVerb, runnerpod.OverrideResource, runnerpod.OverrideGroup, ns, server.Options().Name+"-override", ns)} {
		assert.Contains(t, err.Error(), want)
	}
	assert.Equal(t, 1.0, n, "a refused delete is reviewed once")
	assert.True(t, alive(t, pod))
	eventually(t, hasEvent(t, pod, corev1.EventTypeWarning, "DeleteRefused", "refused delete by "+reaper), "a Warning Event names the requester")
}

func TestForceDeleteOfABusyRunnerIsRefused(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, busyRunner(ns, "busy"))
	err := deletePod(as(t, reaper), pod, client.GracePeriodSeconds(0))
	assert.True(t, apierrors.IsForbidden(err), "got %v", err)
	assert.True(t, alive(t, pod))
}

func TestEvictionOfABusyRunnerIsAnswered429(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, busyRunner(ns, "busy"))
	err := evict(as(t, reaper), pod, false)
	require.Error(t, err)
	assert.True(t, apierrors.IsTooManyRequests(err), "429 so drains retry, got %v", err)
	assert.Equal(t, int32(http.StatusTooManyRequests), statusCode(err))
	assert.Contains(t, err.Error(), "the eviction will succeed once the job ends")
	// It says when the drain can go on: since when the runner has run and
	// when its protection ends, as absolute times.
	started := pod.Status.ContainerStatuses[0].State.Running.StartedAt.UTC()
	capEnd := started.Add(generic.Fleet{}.Defaults().MaxProtected.Duration).Format(time.RFC3339)
	assert.Contains(t, err.Error(), "(since "+started.Format(time.RFC3339)+")")
	assert.Contains(t, err.Error(), "(preset cap 7d), at "+capEnd)
	assert.True(t, alive(t, pod))
	eventually(t, hasEvent(t, pod, corev1.EventTypeWarning, "EvictionRefused", "refused eviction by "+reaper), "a Warning Event names the evicter")
	eventually(t, hasEvent(t, pod, corev1.EventTypeWarning, "EvictionRefused", "protection ends at "+capEnd), "the Event says when the protection ends")
}

// TestARefusedEvictionOfAnARCRunnerNamesItsJob: the job's identity comes
// from the EphemeralRunner the guard read to judge, which only ARC writes.
func TestARefusedEvictionOfAnARCRunnerNamesItsJob(t *testing.T) {
	ns := newNamespace(t, nil)
	r := newARCRunner(t, ns, "busy")
	r.assignJob(t)
	err := evict(as(t, reaper), r.pod, false)
	require.Error(t, err)
	assert.True(t, apierrors.IsTooManyRequests(err), "got %v", err)
	assert.Contains(t, err.Error(), `with a job assigned (job "job-7")`)
	eventually(t, hasEvent(t, r.pod, corev1.EventTypeWarning, "EvictionRefused", `job "job-7"; protection ends at `), "the Event names the job")
}

func TestEvictionOfAPodThatIsGoneIsNotFound(t *testing.T) {
	ns := newNamespace(t, nil)
	err := evict(as(t, reaper), podtest.Runner(ns, "gone").Obj(), false)
	assert.True(t, apierrors.IsNotFound(err), "the guard allows, the API server answers 404; got %v", err)
}

func TestDryRunsGetTheSameAnswerAndNoEvents(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, busyRunner(ns, "busy"))
	deletes, evictions := decisions(t, "delete", "deny"), decisions(t, "eviction", "deny")
	err := deletePod(as(t, reaper), pod, client.DryRunAll)
	assert.True(t, apierrors.IsForbidden(err), "got %v", err)
	err = evict(as(t, reaper), pod, true)
	assert.True(t, apierrors.IsTooManyRequests(err), "a server-side dry-run drain gets 429 too; got %v", err)
	// Events are written after the answer, with the decision's log line: the
	// dry runs' work has reached the point of writing one once both are
	// logged. A real refusal after that is the marker: its Event is the
	// pod's only one, and would be the second of a series had a dry run
	// written the first.
	for _, op := range []string{"delete", "eviction"} {
		loggedAnywhere(t, "decided", map[string]any{"dryRun": true, "operation": op, "namespace": ns, "name": "busy"})
	}
	assert.Equal(t, deletes, decisions(t, "delete", "deny"), "a dry run is not counted")
	assert.Equal(t, evictions, decisions(t, "eviction", "deny"), "a dry run is not counted")
	require.True(t, apierrors.IsForbidden(deletePod(as(t, reaper), pod)))
	eventually(t, func() bool { return len(eventsWith(t, pod, "DeleteRefused")) > 0 }, "the real refusal's Event")
	evs := podEvents(t, pod)
	require.Len(t, evs, 1, "a dry run has no side effects")
	assert.Nil(t, evs[0].Series, "the real refusal's Event is not a dry run's repeated")
}

// A deletecollection reviews each pod in name order and, with the API
// server's default single worker, stops at the first refusal: the pods
// before the busy runner go, the busy runner and those after it stay.
func TestDeleteCollectionStopsAtTheBusyRunner(t *testing.T) {
	ns := newNamespace(t, nil)
	done := create(t, nil, podtest.Runner(ns, "a-done").Terminated("runner", 0, "Completed").Obj())
	plain := create(t, nil, podtest.Plain(ns, "b-web").Obj())
	busy := create(t, nil, busyRunner(ns, "c-busy"))
	var err error
	n := calls(t, func() { err = as(t, reaper).DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns)) })
	require.Error(t, err, "the busy runner's refusal is reported")
	assert.True(t, apierrors.IsForbidden(err))
	assert.Contains(t, err.Error(), `runner container "runner" of pod `+ns+"/c-busy")
	assert.Equal(t, 1.0, n, "one review, of the running runner; the plain pod and the finished runner are filtered at the API server")
	assert.False(t, alive(t, done))
	assert.False(t, alive(t, plain))
	assert.True(t, alive(t, busy))
}

func TestOverrideAllowsWithAWarningAndANormalEventInOneCall(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := busyRunner(ns, "drained")
	pod.Annotations = map[string]string{runnerpod.AllowDelete: "node pool upgrade, ticket OPS-1"}
	pod = create(t, nil, pod)
	c, warnings := warningsAs(t, "alice@example.com")
	var err error
	n := calls(t, func() { err = deletePod(c, pod) })
	require.NoError(t, err)
	assert.Equal(t, 1.0, n, "an allowed graceful delete calls the guard once: later reviews carry deletionTimestamp and matchConditions skip them")
	require.Len(t, *warnings, 1)
	assert.Contains(t, (*warnings)[0], "node pool upgrade, ticket OPS-1")
	assert.False(t, alive(t, pod))
	eventually(t, hasEvent(t, pod, corev1.EventTypeNormal, "DeleteOverridden", "delete by alice@example.com allowed by runnerguard.io/allow-delete: node pool upgrade"), "a Normal Event names who and why")
}

func TestAnEmptyOverrideIsRefused(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := busyRunner(ns, "empty")
	pod.Annotations = map[string]string{runnerpod.AllowDelete: ""}
	pod = create(t, nil, pod)
	err := deletePod(as(t, reaper), pod)
	assert.True(t, apierrors.IsForbidden(err))
	assert.Contains(t, err.Error(), "set but empty: a reason is required")
}

func TestExemptPrincipalsAreNeverSentToTheGuard(t *testing.T) {
	ns := newNamespace(t, nil)
	for _, user := range []string{config.NamespaceController, config.PodGC} {
		pod := create(t, nil, busyRunner(ns, "exempt-"+strings.Split(user, ":")[3]))
		var err error
		n := calls(t, func() { err = deletePod(as(t, user), pod) })
		require.NoError(t, err, user)
		assert.Equal(t, 0.0, n, "%s: matchConditions skip the webhook", user)
		assert.False(t, alive(t, pod))
	}
	pod := create(t, nil, busyRunner(ns, "tainted"))
	var err error
	n := calls(t, func() { err = evict(as(t, config.TaintEviction), pod, false) })
	require.NoError(t, err)
	assert.Equal(t, 0.0, n, "taint eviction is exempt at the API server too")
}

func TestOtherPodsAndRepeatDeletesNeverReachTheGuard(t *testing.T) {
	ns := newNamespace(t, nil)
	plain := create(t, nil, podtest.Plain(ns, "web").Running("app").Obj())
	assert.Equal(t, 0.0, calls(t, func() { require.NoError(t, deletePod(as(t, reaper), plain)) }))
	pod := busyRunner(ns, "twice")
	pod.Annotations = map[string]string{runnerpod.AllowDelete: "test"}
	pod = create(t, nil, pod)
	require.NoError(t, deletePod(as(t, reaper), pod))
	assert.Equal(t, 0.0, calls(t, func() { require.NoError(t, deletePod(as(t, reaper), pod)) }), "a terminating pod's delete is not reviewed")
}

func TestARunnerThatNeverStartedMayBeReaped(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, podtest.Runner(ns, "stuck").Waiting("runner", "ImagePullBackOff").Obj())
	require.NoError(t, deletePod(as(t, reaper), pod))
}

func TestLegacyARCUnregisteredRunnerIsIdle(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := podtest.ARCLegacy(ns, "legacy").RunningSince("runner", time.Now()).Obj()
	registered := create(t, nil, pod)
	assert.True(t, apierrors.IsForbidden(deletePod(as(t, reaper), registered)))
	pod = podtest.ARCLegacy(ns, "legacy-idle").RunningSince("runner", time.Now()).Annotate(arclegacy.Unregistered, time.Now().UTC().Format(time.RFC3339)).Obj()
	require.NoError(t, deletePod(as(t, reaper), create(t, nil, pod)))
}

func TestGitLabOwnerPrincipalEndsItsJob(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, podtest.GitLab(ns, "build-1").RunningSince("build", time.Now()).Obj())
	assert.True(t, apierrors.IsForbidden(deletePod(as(t, reaper), pod)), "a stranger may not delete a running job")
	require.NoError(t, deletePod(as(t, ownerPrincipal), pod), "the manager ends its job")
}

func TestARCScaleSetRunnerIsJudgedByItsEphemeralRunner(t *testing.T) {
	ns := newNamespace(t, nil)
	ctx := context.Background()
	er := apitest.EphemeralRunner(ns, "arc-runner")
	require.NoError(t, admin.Create(ctx, er))
	pod := podtest.ARCScaleSet(ns, "arc-runner").RunningSince("runner", time.Now()).Obj()
	pod.OwnerReferences[0].UID = er.GetUID()
	pod = create(t, nil, pod)
	arc := "system:serviceaccount:arc-systems:arc-gha-rs-controller"

	require.NoError(t, unstructured.SetNestedField(er.Object, int64(4711), "status", "jobRequestId"))
	require.NoError(t, admin.Status().Update(ctx, er))
	assert.True(t, apierrors.IsTooManyRequests(evict(as(t, reaper), pod, false)), "a runner with a job is not evicted")
	err := deletePod(as(t, arc), pod)
	assert.True(t, apierrors.IsForbidden(err), "a busy runner is protected even from ARC")
	assert.Contains(t, err.Error(), "with a job assigned")

	unstructured.RemoveNestedField(er.Object, "status", "jobRequestId")
	require.NoError(t, admin.Status().Update(ctx, er))
	require.NoError(t, deletePod(as(t, arc), pod), "ARC removes an idle runner on scale-down")

	orphan := podtest.ARCScaleSet(ns, "orphan").RunningSince("runner", time.Now()).Obj()
	orphan = create(t, nil, orphan)
	err = deletePod(as(t, reaper), orphan)
	assert.True(t, apierrors.IsForbidden(err), "an EphemeralRunner that cannot be read means busy")
	assert.Contains(t, err.Error(), "could not be read")
}

// The fleets whose owner ends a job by deleting its pod: the injector
// records the CREATE's requester, and a DELETE by that principal is allowed:
// GitLab's manager from a namespace of its own, ARC's runner with its own
// pod's token (TestTheJobOwnerIsNoNameAnEditorCanWear plays the layouts
// and tokens that are refused).
func TestTheCreatorOfAJobPodEndsItsJob(t *testing.T) {
	ns := newNamespace(t, nil)
	const kubeMode = "arc-runner"
	serviceAccountIn(t, ns, kubeMode)
	may(t, ns, serviceAccount("system:serviceaccount:"+ns+":"+kubeMode), "edit")
	runner := token(t, cs, ns, kubeMode, runnerPod(t, ns, "arc-runner-x", kubeMode))
	for _, tc := range []struct {
		name, creator string
		as            client.Client
		pod           *corev1.Pod
		runner        string
	}{
		{name: "gitlab", creator: "system:serviceaccount:gitlab-runner:gitlab-runner", as: as(t, "system:serviceaccount:gitlab-runner:gitlab-runner"),
			pod: podtest.GitLab(ns, "runner-abc-project-1-concurrent-0").Obj(), runner: "build"},
		{name: "arc-workflow", creator: runner.user, as: runner.client(t), pod: podtest.ARCWorkflow(ns, "arc-runner-x").Obj(), runner: "job"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod
			pod.Annotations = map[string]string{runnerpod.CreatedBy: reaper} // a pod cannot claim an owner
			pod = create(t, tc.as, pod)
			got := &corev1.Pod{}
			require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
			assert.Equal(t, tc.creator, got.Annotations[runnerpod.CreatedBy], "the injector records the requester, overwriting")
			setStatus(t, got, podtest.GitLab(ns, "x").RunningSince(tc.runner, time.Now()).Obj().Status)
			assert.True(t, apierrors.IsForbidden(deletePod(as(t, reaper), pod)), "the forged creator gains nothing")
			require.NoError(t, deletePod(tc.as, pod, client.GracePeriodSeconds(0)), "the job's owner ends it (ARC deletes with grace 0)")
		})
	}
}

// The fleet's cleanup of runners that are not running costs no webhook
// call: the pod watcher, not the guard, records their deaths.
func TestDeletesOfRunnersThatAreNotRunningNeverReachTheGuard(t *testing.T) {
	ns := newNamespace(t, nil)
	for _, pod := range []*corev1.Pod{
		podtest.Runner(ns, "ended").Terminated("runner", 1, "Error").Obj(),
		podtest.Runner(ns, "succeeded").Terminated("runner", 0, "Completed").Phase(corev1.PodSucceeded).Obj(),
		podtest.Runner(ns, "never-started").Waiting("runner", "ContainerCreating").Obj(),
		podtest.Runner(ns, "no-status").Obj(),
	} {
		pod = create(t, nil, pod)
		assert.Equal(t, 0.0, calls(t, func() { require.NoError(t, deletePod(as(t, reaper), pod)) }), pod.Name)
	}
}
