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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const (
	karpenterMark = runnerpod.KarpenterDoNotDisrupt
	caMark        = runnerpod.ClusterAutoscalerSafeEvict
	volumesMark   = runnerpod.ClusterAutoscalerLocalVolumes
)

// marksOf is the pod's busy-state marks and runnerguard's list of them, as
// the API server has them; the list leaves out the local-volumes mark,
// which follows whether the pod was instrumented, not its state (see
// TestAnInstrumentedPodNamesItsInjectedVolumes).
func marksOf(t *testing.T, pod *corev1.Pod) map[string]string {
	t.Helper()
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	out := map[string]string{}
	for _, k := range []string{karpenterMark, caMark, runnerpod.Marked} {
		if v, ok := got.Annotations[k]; ok {
			out[k] = v
		}
	}
	if list, ok := out[runnerpod.Marked]; ok {
		out[runnerpod.Marked] = strings.Join(slices.DeleteFunc(strings.Split(list, ","), func(k string) bool { return k == volumesMark }), ",")
		if out[runnerpod.Marked] == "" {
			delete(out, runnerpod.Marked)
		}
	}
	return out
}

// marksBecome waits until the pod's marks are want.
func marksBecome(t *testing.T, pod *corev1.Pod, want map[string]string, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, marksOf(t, pod)) }, patience, 100*time.Millisecond,
		"%s: the marks are %v", what, marksOf(t, pod))
}

// clone is a copy of w to build on.
func clone(w *podtest.Wrapper) *podtest.Wrapper { return &podtest.Wrapper{Pod: *w.Pod.DeepCopy()} }

var (
	busyMarks = map[string]string{karpenterMark: "true", caMark: "false", runnerpod.Marked: karpenterMark + "," + caMark}
	// freeMarks tell cluster-autoscaler it may take the pod's node.
	freeMarks = map[string]string{caMark: "true", runnerpod.Marked: caMark}
)

// The leader marks a runner pod for the autoscalers when its runner starts,
// by each preset's rule, and marks it safe to evict before and after.
func TestMarksFollowTheRunnersBusyState(t *testing.T) {
	ns := newNamespace(t, nil)
	for _, tc := range []struct {
		name   string
		pod    *podtest.Wrapper
		runner string
	}{
		{"generic", podtest.Runner(ns, "generic"), "runner"},
		{"gitlab", podtest.GitLab(ns, "gitlab"), "build"},
		{"arc-workflow", podtest.ARCWorkflow(ns, "arc-runner"), "job"},
		{"arc-legacy", podtest.ARCLegacy(ns, "legacy"), "runner"},
		// Its EphemeralRunner does not exist (no ARC here): its job is
		// unreadable, which the guard counts as busy.
		{"arc-scale-set", podtest.ARCScaleSet(ns, "scale-set"), "runner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := create(t, nil, clone(tc.pod).Obj())
			assert.Equal(t, freeMarks, marksOf(t, pod), "the runner has not started: safe to evict")
			setStatus(t, pod, clone(tc.pod).RunningSince(tc.runner, time.Now().Add(-time.Minute)).Obj().Status)
			marksBecome(t, pod, busyMarks, "a running runner is busy")
			setStatus(t, pod, clone(tc.pod).Terminated(tc.runner, 0, "Completed").Obj().Status)
			marksBecome(t, pod, freeMarks, "an ended runner holds no node")
		})
	}
}

// A mark the pod came with is its author's: runnerguard sets only the
// other, and removes only that.
func TestAnAuthorsOwnMarkIsLeftAlone(t *testing.T) {
	ns := newNamespace(t, nil)
	w := podtest.Runner(ns, "authored").Annotate(karpenterMark, "false")
	pod := create(t, nil, clone(w).Obj())
	setStatus(t, pod, clone(w).RunningSince("runner", time.Now().Add(-time.Minute)).Obj().Status)
	marksBecome(t, pod, map[string]string{karpenterMark: "false", caMark: "false", runnerpod.Marked: caMark}, "the author's mark stays as written")
	setStatus(t, pod, clone(w).Terminated("runner", 0, "Completed").Obj().Status)
	marksBecome(t, pod, map[string]string{karpenterMark: "false", caMark: "true", runnerpod.Marked: caMark}, "only runnerguard's mark changes")
}

// A runner past its protection cap is no longer protected: its marks go
// when the cap passes, with no event of the pod's to tell the leader.
func TestARunnerPastItsProtectionCapLosesItsMarks(t *testing.T) {
	ns := newNamespace(t, nil)
	limit := generic.Fleet{}.Defaults().MaxProtected.Duration
	for _, p := range suiteCfg.Presets {
		if p.Name == generic.Name {
			limit = p.MaxProtected.Duration
		}
	}
	w := podtest.Runner(ns, "long")
	pod := create(t, nil, clone(w).Obj())
	// Started so that the cap passes a few seconds from now.
	setStatus(t, pod, clone(w).RunningSince("runner", time.Now().Add(-limit+3*time.Second)).Obj().Status)
	marksBecome(t, pod, busyMarks, "busy within its cap")
	marksBecome(t, pod, freeMarks, "the cap has passed")
}

// The override frees a busy runner for anyone, the autoscalers included.
func TestAnOverriddenRunnerLosesItsMarks(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, busyRunner(ns, "drained"))
	marksBecome(t, pod, busyMarks, "busy")
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	patch := client.MergeFrom(got.DeepCopy())
	got.Annotations[runnerpod.AllowDelete] = "node maintenance"
	require.NoError(t, admin.Patch(context.Background(), got, patch))
	marksBecome(t, pod, freeMarks, "an overridden runner holds no node")
}

// A scale-set runner's job is on its EphemeralRunner: the leader watches
// them, so the marks follow the job as ARC records it, with no change to
// the pod.
func TestAScaleSetRunnersMarksFollowItsEphemeralRunner(t *testing.T) {
	ns := newNamespace(t, nil)
	ctx := context.Background()
	er := apitest.EphemeralRunner(ns, "arc-job")
	// A finalizer of the test's own holds the EphemeralRunner while it is
	// deleted, as ARC's own do.
	er.SetFinalizers([]string{arcscaleset.RegistrationFinalizer, "example.com/hold"})
	require.NoError(t, admin.Create(ctx, er))
	t.Cleanup(func() {
		er := er.DeepCopy()
		if admin.Get(ctx, client.ObjectKeyFromObject(er), er) == nil {
			er.SetFinalizers(nil)
			_ = admin.Update(ctx, er)
		}
	})
	w := podtest.ARCScaleSet(ns, "arc-job")
	w.OwnerReferences[0].UID = er.GetUID()
	pod := create(t, nil, clone(w).RunningSince("runner", time.Now().Add(-time.Minute)).Obj())

	setJob := func(id any) {
		t.Helper()
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(er), er))
		if id == nil {
			unstructured.RemoveNestedField(er.Object, "status", "jobRequestId")
		} else {
			require.NoError(t, unstructured.SetNestedField(er.Object, id, "status", "jobRequestId"))
		}
		require.NoError(t, admin.Status().Update(ctx, er))
	}
	setJob(int64(42))
	marksBecome(t, pod, busyMarks, "ARC assigned a job")
	setJob(nil)
	marksBecome(t, pod, freeMarks, "no job assigned: idle")
	setJob(int64(43))
	marksBecome(t, pod, busyMarks, "another job")

	// ARC removes its registration finalizer from a deleting
	// EphemeralRunner only once the Actions service let the runner go.
	require.NoError(t, admin.Delete(ctx, er))
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(er), er))
	er.SetFinalizers([]string{"example.com/hold"})
	require.NoError(t, admin.Update(ctx, er))
	marksBecome(t, pod, freeMarks, "the job is over")
}

// marksSettled waits until the leader has brought pod's marks where its
// rules put them (recorder.MarkPlan, with the guard's rules as the leader
// reads them), and returns the pod as it is then: a test that goes on to
// update the pod must not hold a copy the marker's patch made stale.
func marksSettled(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	got := &corev1.Pod{}
	require.Eventually(t, func() bool {
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
		j := judgementOf(t, got)
		_, relabel := recorder.BudgetLabelPlan(got, suiteCfg.Marks.Budgets && j.Budget)
		return recorder.MarkPlan(got, j, suiteCfg.Marks) == nil && !relabel
	}, patience, 50*time.Millisecond, "the leader settles the pod's marks")
	return got
}

// judgementOf is what the leader's marker judges of pod.
func judgementOf(t *testing.T, pod *corev1.Pod) recorder.Judgement {
	ctx := context.Background()
	ns := &corev1.Namespace{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Name: pod.Namespace}, ns))
	runner, ok := presets.Match(pod, suiteCfg.Presets)
	// The leader's cache holds the labelled pods only.
	if _, seen := pod.Labels[runnerpod.RunnerLabel]; !ok || !seen {
		return recorder.Judgement{}
	}
	job := runnerpod.JobNotRead
	if ref := arcscaleset.OwnerRef(pod); runner.Preset.Name == arcscaleset.Name && ref.Name != "" {
		er := &unstructured.Unstructured{}
		er.SetAPIVersion("actions.github.com/v1alpha1")
		er.SetKind("EphemeralRunner")
		if admin.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, er) != nil {
			er = nil
		}
		job, _ = arcscaleset.JobSignal(er, ref.UID)
	}
	return recorder.Judge(pod, runner, recorder.Facts{
		Selected: ns.Labels[runnerpod.EnabledNamespaceLabel] == "true",
		Enforce:  config.ModeFor(ns.Labels, suiteCfg.Guard.Mode) == config.ModeEnforce,
		Job:      job, Now: time.Now(),
	})
}

// An instrumented runner pod names the injector's volumes to
// cluster-autoscaler as safe to lose, busy or not.
func TestAnInstrumentedPodNamesItsInjectedVolumes(t *testing.T) {
	ns := newNamespace(t, nil)
	w := podtest.Runner(ns, "instrumented")
	pod := create(t, nil, clone(w).Obj())
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	require.True(t, slices.ContainsFunc(got.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == runnerpod.VitalsContainer }),
		"the injector added the sidecar")
	injected := runnerpod.CgroupVolume + "," + runnerpod.VitalsVolume
	assert.Equal(t, injected, got.Annotations[volumesMark], "idle")
	setStatus(t, pod, clone(w).RunningSince("runner", time.Now().Add(-time.Minute)).Obj().Status)
	marksBecome(t, pod, busyMarks, "busy")
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	assert.Equal(t, injected, got.Annotations[volumesMark], "busy")
}
