//go:build e2e

package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/arcworkflow"
	genericfleet "github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// What each of the policy's rules says when it refuses (the policy's
// messages, shortened).
const (
	overrideRefused = "may set or change runnerguard.io/allow-delete"
	forgedCreator   = "names the principal that created the pod: set it to your own username or leave it out"
	creatorChanged  = "runnerguard.io/created-by is written once, at CREATE, and never changes"
	credentialKept  = "runnerguard.io/created-with is written once, at CREATE, and never changes"
	jobStartKept    = "only runnerguard may write runnerguard.io/job-assigned-at"
	zombieKept      = "only runnerguard may write runnerguard.io/zombie"
	idleSignal      = "may change actions-runner/unregistration-complete-timestamp"
	poolIdleSignal  = "may change runnerguard.io/idle, the runner's idle signal"
	scaleSetLabel   = "may change the label actions-ephemeral-runner"
	workflowLabel   = "may change the label runner-pod"
	ownersChanged   = "may change a runner pod's ownerReferences"
	presetFixed     = "a pod's preset is fixed when it is created"
)

// requireRefusedByPolicy requires err to be the policy's 403 saying says.
func requireRefusedByPolicy(t *testing.T, err error, says string) {
	t.Helper()
	require.Error(t, err, "the policy must refuse")
	assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
	policy := policyDenied()
	if says == overrideRefused {
		policy = refusedBy(server.Options().Name + "-override")
	}
	assert.Contains(t, err.Error(), policy)
	assert.Contains(t, err.Error(), says)
}

// patchMeta merge-patches the object's metadata as c (null removes a key).
func patchMeta(c client.Client, obj client.Object, meta map[string]any) error {
	raw, err := json.Marshal(map[string]any{"metadata": meta})
	if err != nil {
		return err
	}
	return c.Patch(context.Background(), obj.DeepCopyObject().(client.Object), client.RawPatch(types.MergePatchType, raw))
}

func annotations(kv ...any) map[string]any { return map[string]any{"annotations": pairs(kv)} }
func labels(kv ...any) map[string]any      { return map[string]any{"labels": pairs(kv)} }

func pairs(kv []any) map[string]any {
	m := map[string]any{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func running(w *podtest.Wrapper, container string) *corev1.Pod {
	return w.RunningSince(container, time.Now().Add(-5*time.Minute)).Obj()
}

// Every signal the guard trusts, written by each principal that would try:
// refused unless the principal is the one the contract names, whoever else
// holds pods patch.
func TestOnlyTheRightPrincipalsWriteTheSignals(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	ciJob := may(t, ns, serviceAccount("system:serviceaccount:"+ns+":ci-job"), podPatcher)
	nsAdmin := may(t, ns, person("dana@example.com"), "admin")
	operator := may(t, ns, person("olga@example.com"), "edit")
	mayOverride(t, ns, operator)
	arc := may(t, ns, serviceAccount(arcController), "edit")
	legacy := may(t, ns, serviceAccount(arclegacy.Controller), "edit")
	workflow := may(t, ns, serviceAccount(workflowRunner), "edit")
	gc := may(t, ns, serviceAccount(config.GarbageCollector), "edit")
	pool := may(t, ns, serviceAccount(poolController), "edit")

	generic := func(name string) *corev1.Pod { return running(podtest.Runner(ns, name), "runner") }
	overridden := func(name string) *corev1.Pod {
		return running(podtest.Runner(ns, name).Annotate(runnerpod.AllowDelete, "node maintenance"), "runner")
	}
	gitlab := func(name string) *corev1.Pod { return running(podtest.GitLab(ns, name), "build") }
	legacyRunner := func(name string) *corev1.Pod { return running(podtest.ARCLegacy(ns, name), "runner") }
	scaleSet := func(name string) *corev1.Pod { return running(podtest.ARCScaleSet(ns, name), "runner") }
	workflowPod := func(name string) *corev1.Pod { return running(podtest.ARCWorkflow(ns, name), "job") }
	runnerSetPod := func(name string) *corev1.Pod {
		return running(podtest.Runner(ns, name).Label(arclegacy.RunnerSetLabel, "rs"), "runner")
	}
	unlabelledScaleSet := func(name string) *corev1.Pod {
		pod := scaleSet(name)
		delete(pod.Labels, arcscaleset.Label)
		return pod
	}
	idleOwner := map[string]any{"ownerReferences": []any{map[string]any{
		"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner", "name": "idle-runner", "uid": "uid-idle", "controller": true,
	}}}
	const unregistered = "2026-11-23T12:00:00Z"
	markedIdle := func(name string) *corev1.Pod {
		return running(podtest.Runner(ns, name).Annotate(genericfleet.IdleAnnotation, "true"), "runner")
	}

	cases := []struct {
		name    string
		pod     func(name string) *corev1.Pod
		by      principal
		meta    map[string]any
		refused string // empty: allowed
	}{
		{"a reaper with edit cannot switch the protection off", generic, reaperSA, annotations(runnerpod.AllowDelete, "orphan cleanup"), overrideRefused},
		{"a CI job's service account that patches pods cannot switch it off", generic, ciJob, annotations(runnerpod.AllowDelete, "my job is done"), overrideRefused},
		{"a namespace admin without the override permission cannot switch it off", generic, nsAdmin, annotations(runnerpod.AllowDelete, "admin says so"), overrideRefused},
		{"a reaper cannot rewrite the reason an operator gave", overridden, reaperSA, annotations(runnerpod.AllowDelete, "reaper"), overrideRefused},
		{"an empty override is an override written too", generic, reaperSA, annotations(runnerpod.AllowDelete, ""), overrideRefused},
		{"an operator holding override switches it off", generic, operator, annotations(runnerpod.AllowDelete, "node pool upgrade"), ""},
		{"anyone may remove the override, which restores the protection", overridden, reaperSA, annotations(runnerpod.AllowDelete, nil), ""},
		{"a reaper cannot make itself the job's owner", gitlab, reaperSA, annotations(runnerpod.CreatedBy, reaper), creatorChanged},
		{"a CI job cannot erase the recorded creator", gitlab, ciJob, annotations(runnerpod.CreatedBy, nil), creatorChanged},
		{"a reaper cannot add a creator to a pod that had none", generic, reaperSA, annotations(runnerpod.CreatedBy, reaper), creatorChanged},
		{"a reaper cannot give a pod the credential its manager created it with", gitlab, reaperSA, annotations(runnerpod.CreatedWith, "JTI=reaper"), credentialKept},
		{"a reaper cannot date an ARC runner's job", scaleSet, reaperSA, annotations(runnerpod.JobAssignedAt, "2026-11-01T12:00:00Z"), jobStartKept},
		{"ARC's controller cannot date its runner's job either: runnerguard saw it", scaleSet, arc, annotations(runnerpod.JobAssignedAt, "2026-11-01T12:00:00Z"), jobStartKept},
		{"a reaper cannot name a busy runner a zombie, which would let it go", scaleSet, reaperSA, annotations(runnerpod.ZombieAnnotation, "spent-config 2026-11-01T12:00:00Z"), zombieKept},
		{"nor can the runner's fleet: runnerguard names zombies", scaleSet, arc, annotations(runnerpod.ZombieAnnotation, "spent-config 2026-11-01T12:00:00Z"), zombieKept},
		{"a reaper cannot put refusals on a runner", generic, reaperSA, annotations(refusal.Annotation, `{"v":1,"entries":[]}`), refusalsKept},
		{"nor can the runner's fleet", scaleSet, arc, annotations(refusal.Annotation, `{"v":1,"entries":[]}`), refusalsKept},
		{"a reaper cannot mark a generic runner unregistered", generic, reaperSA, annotations(arclegacy.Unregistered, unregistered), idleSignal},
		{"a namespace admin cannot mark a legacy runner unregistered", legacyRunner, nsAdmin, annotations(arclegacy.Unregistered, unregistered), idleSignal},
		{"ARC's scale-set controller cannot write legacy ARC's signal", legacyRunner, arc, annotations(arclegacy.Unregistered, unregistered), idleSignal},
		{"legacy ARC's controller marks its runner unregistered", legacyRunner, legacy, annotations(arclegacy.Unregistered, unregistered), ""},
		{"a reaper cannot re-point an ARC runner to an idle EphemeralRunner", scaleSet, reaperSA, idleOwner, ownersChanged},
		{"a CI job cannot give a generic runner an owner", generic, ciJob, idleOwner, ownersChanged},
		{"the garbage collector removes a deleted owner", scaleSet, gc, map[string]any{"ownerReferences": nil}, ""},
		{"ARC's controller may re-point its runner", scaleSet, arc, idleOwner, ""},
		{"a reaper cannot label a generic runner an ARC scale-set runner", generic, reaperSA, labels(arcscaleset.Label, "True"), scaleSetLabel},
		{"a reaper cannot strip the scale-set label", scaleSet, reaperSA, labels(arcscaleset.Label, nil), scaleSetLabel},
		{"ARC's controller cannot make a generic runner its own by its label", generic, arc, labels(arcscaleset.Label, "True"), presetFixed},
		{"ARC's controller, trusted with its own fleet's pods only, cannot re-point a generic runner at an idle EphemeralRunner", generic, arc, idleOwner, ownersChanged},
		{"nor a legacy runner", legacyRunner, arc, idleOwner, ownersChanged},
		{"legacy ARC's controller cannot mark a generic runner unregistered", generic, legacy, annotations(arclegacy.Unregistered, unregistered), presetFixed},
		{"legacy ARC's controller marks its RunnerSet's pod unregistered", runnerSetPod, legacy, annotations(arclegacy.Unregistered, unregistered), ""},
		{"legacy ARC's controller cannot make a generic runner a RunnerSet's", generic, legacy, labels(arclegacy.RunnerSetLabel, "rs"), presetFixed},
		{"the garbage collector orphans a runner whose owner decided its preset", unlabelledScaleSet, gc, map[string]any{"ownerReferences": nil}, ""},
		{"a CI job cannot turn a workflow pod into another preset's", workflowPod, ciJob, labels(arcworkflow.PodLabel, nil), workflowLabel},
		// The kubernetes-mode runner's ServiceAccount lives in the runner
		// namespace, where edit wears it: as the docs advise, it is named
		// as no controller, and so trusted with no field.
		{"ARC's kubernetes-mode runner cannot re-point its workflow pod at another runner", workflowPod, workflow, labels(arcworkflow.PodLabel, "other-runner"), workflowLabel},
		{"nor can it re-point an ARC runner at an idle EphemeralRunner", scaleSet, workflow, idleOwner, ownersChanged},
		{"the garbage collector is trusted with the idle signal too", legacyRunner, gc, annotations(arclegacy.Unregistered, unregistered), ""},
		{"but not to make a generic runner a legacy one", generic, gc, annotations(arclegacy.Unregistered, unregistered), presetFixed},
		{"a reaper cannot say a pool's runner is idle", generic, reaperSA, annotations(genericfleet.IdleAnnotation, "true"), poolIdleSignal},
		{"nor take the pool's word back to hold an idle runner", markedIdle, reaperSA, annotations(genericfleet.IdleAnnotation, nil), poolIdleSignal},
		{"nor can ARC's controller speak for the pool", generic, arc, annotations(genericfleet.IdleAnnotation, "true"), poolIdleSignal},
		{"the pool's controller says its runner is idle", generic, pool, annotations(genericfleet.IdleAnnotation, "true"), ""},
		{"and busy again", markedIdle, pool, annotations(genericfleet.IdleAnnotation, nil), ""},
		{"a reaper may still write metadata the guard does not read", generic, reaperSA, annotations("example.com/note", "seen"), ""},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := create(t, nil, tc.pod(podName(i)))
			err := patchMeta(tc.by.client(t), pod, tc.meta)
			if tc.refused == "" {
				require.NoError(t, err)
				return
			}
			requireRefusedByPolicy(t, err, tc.refused)
		})
	}
}

func podName(i int) string { return "p" + string(rune('a'+i/26)) + string(rune('a'+i%26)) }

// runnerguard.io/created-by must name the requester at CREATE. With the
// injector up it overwrites what a job pod came with; with it down (or on
// a preset it does not record) the policy refuses a forged value.
func TestACreatorCannotBeForgedAtCreate(t *testing.T) {
	ns := newNamespace(t, nil)
	ci := may(t, ns, serviceAccount("system:serviceaccount:"+ns+":ci-job"), podPatcher)
	forged := func(w *podtest.Wrapper) *corev1.Pod {
		pod := w.Annotate(runnerpod.CreatedBy, ownerPrincipal).Obj()
		pod.Spec.NodeName = "node-e2e"
		pod.UID = ""
		return pod
	}
	ctx := context.Background()

	t.Run("the injector overwrites a runner pod's forged creator, whatever its fleet", func(t *testing.T) {
		for _, w := range []*podtest.Wrapper{podtest.GitLab(ns, "injected"), podtest.Runner(ns, "generic"), podtest.ARCScaleSet(ns, "arc")} {
			pod := forged(w)
			require.NoError(t, ci.client(t).Create(ctx, pod))
			t.Cleanup(func() { forceRemove(pod) })
			assert.Equal(t, ci.user, pod.Annotations[runnerpod.CreatedBy], pod.Name)
		}
	})

	server.Stop()
	defer func() { require.NoError(t, server.Start(ctx), "restarting runnerguard") }()
	t.Run("with the injector down a forged creator is overwritten by the API server, or refused before 1.36", func(t *testing.T) {
		pod := forged(podtest.GitLab(ns, "down"))
		err := ci.client(t).Create(ctx, pod)
		if !creatorPolicyServed() {
			requireRefusedByPolicy(t, err, forgedCreator)
			return
		}
		require.NoError(t, err)
		t.Cleanup(func() { forceRemove(pod) })
		assert.Equal(t, ci.user, pod.Annotations[runnerpod.CreatedBy], "the creator policy wrote the real creator")
	})
	t.Run("with the injector down the requester may name itself", func(t *testing.T) {
		pod := podtest.GitLab(ns, "honest").Annotate(runnerpod.CreatedBy, ci.user).Obj()
		pod.UID = ""
		require.NoError(t, ci.client(t).Create(ctx, pod))
		t.Cleanup(func() { forceRemove(pod) })
		assert.Equal(t, ci.user, pod.Annotations[runnerpod.CreatedBy])
	})
}

// pods/status is not only status: kube-apiserver 1.37 keeps the labels and
// annotations a status update brings (its status strategy resets only the
// spec and ownerReferences), so whoever may write a pod's status could write
// the guard's signals there. The policy covers pods/status for that reason.
func TestPodStatusCanWriteLabelsAndAnnotationsSoThePolicyCoversIt(t *testing.T) {
	ctx := context.Background()
	writesStatus := authorizationv1.ResourceAttributes{Verb: "update", Resource: "pods", Subresource: "status"}
	tamper := func(t *testing.T, c client.Client, pod *corev1.Pod, f func(*corev1.Pod)) (*corev1.Pod, error) {
		t.Helper()
		got := &corev1.Pod{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
		f(got)
		if err := c.Status().Update(ctx, got); err != nil {
			return nil, err
		}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
		return got, nil
	}
	everything := func(p *corev1.Pod) {
		p.Annotations[runnerpod.AllowDelete] = "via status"
		p.Labels[arcscaleset.Label] = "False"
		p.OwnerReferences = nil
	}

	t.Run("what a status update changes where no policy applies", func(t *testing.T) {
		// No policy applies to a pod that is no runner's (the override's
		// policy applies to runner pods in every namespace).
		ns := plainNamespace(t, nil)
		kubelet := serviceAccount("system:serviceaccount:" + ns + ":status-writer")
		grant(t, ns, kubelet, statusWriter, writesStatus)
		plain := podtest.Plain(ns, "web").Label(arcscaleset.Label, "True").Annotate("example.com/x", "y").Obj()
		plain.OwnerReferences = podtest.ARCScaleSet(ns, "arc").Obj().OwnerReferences
		require.NotEmpty(t, plain.OwnerReferences)
		pod := create(t, nil, running(&podtest.Wrapper{Pod: *plain}, "app"))
		got, err := tamper(t, kubelet.client(t), pod, everything)
		require.NoError(t, err)
		assert.Equal(t, "via status", got.Annotations[runnerpod.AllowDelete], "annotations change through pods/status")
		assert.Equal(t, "False", got.Labels[arcscaleset.Label], "labels change through pods/status")
		assert.Equal(t, pod.OwnerReferences, got.OwnerReferences, "ownerReferences do not")
	})

	ns := newNamespace(t, nil)
	kubelet := serviceAccount("system:serviceaccount:" + ns + ":status-writer")
	grant(t, ns, kubelet, statusWriter, writesStatus)
	node := nodeIdentity("node-e2e")
	grant(t, ns, node, statusWriter, writesStatus)
	i := 0
	for _, tc := range []struct {
		name    string
		change  func(*corev1.Pod)
		refused string
	}{
		{"the override written through pods/status is refused", func(p *corev1.Pod) { p.Annotations[runnerpod.AllowDelete] = "via status" }, overrideRefused},
		{"a preset label changed through pods/status is refused", func(p *corev1.Pod) { p.Labels[arcscaleset.Label] = "False" }, scaleSetLabel},
		{"a creator written through pods/status is refused", func(p *corev1.Pod) { p.Annotations[runnerpod.CreatedBy] = kubelet.user }, creatorChanged},
		{"the node's kubelet ending the pod passes", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, ""},
	} {
		i++
		t.Run(tc.name, func(t *testing.T) {
			pod := create(t, nil, running(podtest.ARCScaleSet(ns, podName(i)).Annotate("example.com/x", "y"), "runner"))
			by := kubelet
			if tc.refused == "" {
				by = node
			}
			_, err := tamper(t, by.client(t), pod, tc.change)
			if tc.refused == "" {
				require.NoError(t, err)
				return
			}
			requireRefusedByPolicy(t, err, tc.refused)
		})
	}
}

// A home-grown pool says its runner is idle (runnerguard.io/idle, which
// only its controller may write): the guard lets the runner go and its
// marks say it may be disrupted; a runner the pool has not marked stays
// held.
func TestAPoolsIdleRunnerIsLetGo(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	pool := may(t, ns, serviceAccount(poolController), "edit")
	busy := create(t, nil, running(podtest.Runner(ns, "busy"), "runner"))
	idle := create(t, nil, running(podtest.Runner(ns, "idle"), "runner"))
	eventually(t, func() bool { return annotationOf(t, idle, caMark) == "false" }, "a started runner is busy")
	require.NoError(t, patchMeta(pool.client(t), idle, annotations(genericfleet.IdleAnnotation, "true")))
	eventually(t, func() bool { return annotationOf(t, idle, caMark) == "true" }, "the pool's word drops its busy mark")
	assert.Equal(t, int32(http.StatusForbidden), statusCode(deletePod(reaperSA.client(t), busy)), "an unmarked runner is held")
	require.NoError(t, deletePod(reaperSA.client(t), idle), "an idle runner goes")
}

// A home-grown pool holds a lease on its runner's job (runnerguard.io/idle
// a time, which only its controller may move): the runner is held while
// the pool renews it, its busy marks kept, and let go once the pool stops
// (a hung runner, a pool that lost track of it). A reaper cannot end the
// lease early.
func TestAPoolsLeaseHoldsItsRunnerUntilItLapses(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	pool := may(t, ns, serviceAccount(poolController), "edit")
	lease := func(d time.Duration) map[string]any {
		return annotations(genericfleet.IdleAnnotation, time.Now().Add(d).UTC().Format(time.RFC3339))
	}
	pod := create(t, nil, running(podtest.Runner(ns, "leased"), "runner"))
	require.NoError(t, patchMeta(pool.client(t), pod, lease(time.Hour)))
	err := deletePod(reaperSA.client(t), pod)
	require.Equal(t, int32(http.StatusForbidden), statusCode(err), "held while the lease runs: %v", err)
	assert.Contains(t, err.Error(), "its fleet's lease on the job holds it until")
	err = patchMeta(reaperSA.client(t), pod, lease(-time.Hour))
	require.Error(t, err, "a reaper may not end the lease")
	assert.Contains(t, err.Error(), genericfleet.IdleAnnotation)
	eventually(t, func() bool { return annotationOf(t, pod, caMark) == "false" }, "busy marks while the lease runs")

	// The pool renews for a few seconds more, then stops renewing.
	require.NoError(t, patchMeta(pool.client(t), pod, lease(3*time.Second)))
	eventually(t, func() bool { return annotationOf(t, pod, caMark) == "true" }, "the lapsed lease drops the busy marks, with no write to the pod")
	eventually(t, func() bool { return deletePod(reaperSA.client(t), pod) == nil }, "the lapsed lease lets the runner go")
}
