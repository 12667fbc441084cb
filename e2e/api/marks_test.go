//go:build e2e

package api

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const (
	karpenterMark = runnerpod.KarpenterDoNotDisrupt
	caMark        = runnerpod.ClusterAutoscalerSafeEvict
)

// marksOf is the pod's autoscaler marks and runnerguard's list of them, as
// the API server has them.
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
	return out
}

// marksBecome waits until the pod's marks are want.
func marksBecome(t *testing.T, pod *corev1.Pod, want map[string]string, what string) {
	t.Helper()
	require.Eventually(t, func() bool { return assert.ObjectsAreEqual(want, marksOf(t, pod)) }, 15*time.Second, 100*time.Millisecond,
		"%s: the marks are %v", what, marksOf(t, pod))
}

// clone is a copy of w to build on.
func clone(w *podtest.Wrapper) *podtest.Wrapper { return &podtest.Wrapper{Pod: *w.Pod.DeepCopy()} }

var busyMarks = map[string]string{karpenterMark: "true", caMark: "false", runnerpod.Marked: karpenterMark + "," + caMark}

// The leader marks a runner pod for the autoscalers when its runner starts,
// by each preset's rule, and removes the marks when the runner ends.
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
		// Its job is on the EphemeralRunner, which the marker does not
		// read: a running runner counts as busy, as the guard counts one
		// whose EphemeralRunner it cannot read.
		{"arc-scale-set", podtest.ARCScaleSet(ns, "scale-set"), "runner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := create(t, nil, clone(tc.pod).Obj())
			assert.Empty(t, marksOf(t, pod), "the injector writes no mark: the runner has not started")
			setStatus(t, pod, clone(tc.pod).RunningSince(tc.runner, time.Now().Add(-time.Minute)).Obj().Status)
			marksBecome(t, pod, busyMarks, "a running runner is busy")
			setStatus(t, pod, clone(tc.pod).Terminated(tc.runner, 0, "Completed").Obj().Status)
			marksBecome(t, pod, map[string]string{}, "an ended runner holds no node")
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
	marksBecome(t, pod, map[string]string{karpenterMark: "false"}, "only runnerguard's mark goes")
}

// A runner past its protection cap is no longer protected: its marks go
// when the cap passes, with no event of the pod's to tell the leader.
func TestARunnerPastItsProtectionCapLosesItsMarks(t *testing.T) {
	ns := newNamespace(t, nil)
	limit := runnerpod.Generic.DefaultMaxProtected()
	for _, p := range suiteCfg.Presets {
		if p.Name == runnerpod.Generic {
			limit = p.MaxProtected.Duration
		}
	}
	w := podtest.Runner(ns, "long")
	pod := create(t, nil, clone(w).Obj())
	// Started so that the cap passes a few seconds from now.
	setStatus(t, pod, clone(w).RunningSince("runner", time.Now().Add(-limit+3*time.Second)).Obj().Status)
	marksBecome(t, pod, busyMarks, "busy within its cap")
	marksBecome(t, pod, map[string]string{}, "the cap has passed")
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
	marksBecome(t, pod, map[string]string{}, "an overridden runner holds no node")
}
