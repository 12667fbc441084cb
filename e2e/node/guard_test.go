//go:build node

package node

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

	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestABusyRunnerSurvivesTheReaperAndFinishesItsJob(t *testing.T) {
	ns := newNamespace(t)
	pod := start(t, runnerPod(ns, "busy", "64Mi", "job", "12"))

	err := as(t, reaper).Delete(context.Background(), pod)
	require.Error(t, err, "the reaper's delete of a busy runner")
	assert.True(t, apierrors.IsForbidden(err), "403, got %v", err)
	assert.Contains(t, err.Error(), runnerpod.AllowDelete, "the refusal says how to override")
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(podEvents(t, pod), func(e eventsv1.Event) bool {
			return e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, reaper)
		})
	}, 15*time.Second, 250*time.Millisecond, "a Warning Event on the pod names the reaper")

	pod = waitPod(t, pod, "the job to finish", 60*time.Second, finished)
	assert.Nil(t, pod.DeletionTimestamp, "the pod was never marked for deletion")
	term := containerStatus(pod, "runner").State.Terminated
	assert.Equal(t, int32(0), term.ExitCode, "the runner finished its job undisturbed")
	assert.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	out := logs(t, pod, "runner")
	assert.Contains(t, out, "job finished, exiting 0")
	assert.NotContains(t, out, "SIGTERM", "the runner was never signalled")
}
