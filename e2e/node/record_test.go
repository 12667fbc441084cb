//go:build node

package node

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"

	"github.com/runnerguard/runnerguard/webhook/death"
)

func diedEvents(t *testing.T, pod *corev1.Pod) []eventsv1.Event {
	t.Helper()
	return slices.DeleteFunc(podEvents(t, pod), func(e eventsv1.Event) bool {
		return e.Reason != death.ReasonDied || e.Regarding.UID != pod.UID
	})
}

// A pool runner that restarts in place dies more than once in one pod: each
// death is on record, once.
func TestEachDeathOfARunnerRestartingInPlaceIsRecordedOnce(t *testing.T) {
	ns := newNamespace(t)
	pod := runnerPod(ns, "restarts", "64Mi", "job", "1", "3")
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod = start(t, pod)
	require.Eventually(t, func() bool { return len(diedEvents(t, pod)) >= 2 }, 120*time.Second, 500*time.Millisecond,
		"two deaths of the restarting runner are recorded")
	ids := map[string]bool{}
	for _, e := range diedEvents(t, pod) {
		r, err := death.Parse(e.Annotations[death.RecordAnnotation])
		require.NoError(t, err)
		assert.Equal(t, death.ErrorExit, r.Class)
		require.NotNil(t, r.ExitCode)
		assert.Equal(t, int32(3), *r.ExitCode)
		assert.False(t, ids[r.ContainerID], "container %s recorded twice", r.ContainerID)
		ids[r.ContainerID] = true
	}
}

// A runner whose image cannot be pulled never starts: one RunnerStuck
// Warning says why. The image is on a loopback port nothing listens on.
func TestARunnerWhoseImageCannotBePulledIsReportedStuck(t *testing.T) {
	ns := newNamespace(t)
	pod := runnerPod(ns, "no-image", "64Mi", "job", "1")
	pod.Spec.Containers[0].Image, pod.Spec.Containers[0].ImagePullPolicy = "127.0.0.1:1/ci/runner:missing", corev1.PullIfNotPresent
	require.NoError(t, admin.Create(context.Background(), pod))
	var stuck []eventsv1.Event
	require.Eventually(t, func() bool {
		stuck = slices.DeleteFunc(podEvents(t, pod), func(e eventsv1.Event) bool { return e.Reason != death.ReasonStuck })
		return len(stuck) > 0
	}, 90*time.Second, 500*time.Millisecond, "RunnerStuck")
	require.Len(t, stuck, 1)
	assert.Equal(t, corev1.EventTypeWarning, stuck[0].Type)
	t.Logf("RunnerStuck: %s", stuck[0].Note)
	assert.True(t, strings.Contains(stuck[0].Note, "ErrImagePull") || strings.Contains(stuck[0].Note, "ImagePullBackOff"), stuck[0].Note)
}

// runnerguard why answers after the pod is gone, from its Event.
func TestWhyTellsHowTheRunnerOfAGonePodDied(t *testing.T) {
	ns := newNamespace(t)
	pod := start(t, runnerPod(ns, "why-me", "64Mi", "job", "1", "2"))
	pod = waitPod(t, pod, "the runner to end", 60*time.Second, finished)
	require.Eventually(t, func() bool { return len(diedEvents(t, pod)) == 1 }, 30*time.Second, 250*time.Millisecond)
	require.NoError(t, admin.Delete(context.Background(), pod))
	require.Eventually(t, func() bool { return gone(t, pod) }, 30*time.Second, 250*time.Millisecond)

	bin := filepath.Join(t.TempDir(), "runnerguard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/runnerguard")
	build.Dir = filepath.Join("..", "..")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	var stdout, stderr bytes.Buffer
	why := exec.Command(bin, "why", "why-me", "-n", ns, "--kubeconfig", kubeconfigPath)
	why.Stdout, why.Stderr = &stdout, &stderr
	require.NoError(t, why.Run(), stderr.String())
	t.Logf("runnerguard why why-me -n %s:\n%s", ns, stdout.String())
	for _, want := range []string{`runner "runner" died: error-exit`, "exit code 2, reason Error", "memory (vitals' final reading): peak"} {
		assert.Contains(t, stdout.String(), want)
	}
}
