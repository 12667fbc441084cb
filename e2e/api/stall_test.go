//go:build e2e

package api

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The leader's stall signal is the vitals sidecar's ready flag, which the
// kubelet writes through pods/status: a reaper with edit and a CI job that
// patches pods cannot write it, so neither can raise a stall Event for a pod
// that is not stalled, nor clear one that is. The same write as a principal
// allowed pods/status goes through, so the refusal is the permission's.
func TestOnlyTheNodeWritesTheSidecarsStallSignal(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	ciJob := may(t, ns, serviceAccount("system:serviceaccount:"+ns+":ci-job"), podPatcher)

	w := podtest.Runner(ns, "stall").RunningSince("runner", time.Now().Add(-5*time.Minute))
	w.Status.InitContainerStatuses = []corev1.ContainerStatus{{
		Name: runnerpod.VitalsContainer, Image: "example.com/vitals:1", ImageID: "example.com/vitals@sha256:0", ContainerID: "containerd://vitals-1",
		Ready: true, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: time.Now().Add(-5 * time.Minute)}}},
	}}
	pod := create(t, nil, w.Obj())
	markStalled := func(c client.Client) error {
		got := &corev1.Pod{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
		got.Status.InitContainerStatuses[0].Ready = false
		return c.Status().Update(ctx, got)
	}
	for name, p := range map[string]principal{"a reaper with edit": reaperSA, "a CI job that patches pods": ciJob} {
		t.Run(name+" cannot mark the sidecar not ready", func(t *testing.T) {
			err := markStalled(p.client(t))
			assert.True(t, apierrors.IsForbidden(err), "want Forbidden, got %v", err)
			got := &corev1.Pod{}
			require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
			assert.False(t, recorder.Stalled(got, time.Now()))
		})
	}
	t.Run("a principal allowed pods/status can, and the leader reads it as a stall", func(t *testing.T) {
		require.NoError(t, markStalled(admin))
		got := &corev1.Pod{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
		assert.True(t, recorder.Stalled(got, time.Now()))
	})
}
