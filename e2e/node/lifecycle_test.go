//go:build node

package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A generic pool's runner waits behind its poller init container until a
// job comes; one that never got a job may be reaped.
func TestARunnerThatNeverStartedIsReaped(t *testing.T) {
	ns := newNamespace(t)
	pod := runnerPod(ns, "waiting", "64Mi", "job", "30")
	pod.Spec.InitContainers = []corev1.Container{{Name: "poller", Image: runnerImage, ImagePullPolicy: corev1.PullNever,
		Command: []string{"sleep", "3600"}}}
	require.NoError(t, admin.Create(context.Background(), pod))
	waitPod(t, pod, "the poller to run", 60*time.Second, func(p *corev1.Pod) bool {
		s := containerStatus(p, "poller")
		return s != nil && s.State.Running != nil
	})

	require.NoError(t, as(t, reaper).Delete(context.Background(), pod), "the reaper may remove a runner that never started")
	require.Eventually(t, func() bool { return gone(t, pod) }, 30*time.Second, 250*time.Millisecond, "the pod is gone")
}

// The namespace controller is an exempt principal, filtered out at the API
// server by the DELETE webhook's matchConditions: namespace cleanup is
// never blocked by a busy runner.
func TestDeletingANamespaceWithABusyRunnerCompletes(t *testing.T) {
	ns := newNamespace(t)
	pod := start(t, runnerPod(ns, "busy", "64Mi", "job", "300"))
	require.NotNil(t, containerStatus(pod, "runner").State.Running)

	obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	require.NoError(t, admin.Delete(context.Background(), obj))
	start := time.Now()
	require.Eventually(t, func() bool {
		err := admin.Get(context.Background(), client.ObjectKeyFromObject(obj), &corev1.Namespace{})
		return apierrors.IsNotFound(err)
	}, 90*time.Second, 500*time.Millisecond, "the namespace is gone")
	t.Logf("namespace deleted in %s", time.Since(start).Round(100*time.Millisecond))
	assert.True(t, gone(t, pod))
}
