//go:build node

package node

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/death"
)

// restartWebhook rolls the webhook Deployment as kubectl rollout restart
// does and waits until the new pods serve and the old ones are gone.
func restartWebhook(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	d := &appsv1.Deployment{}
	require.NoError(t, admin.Get(ctx, client.ObjectKey{Namespace: releaseNamespace, Name: releaseName}, d))
	patch := client.MergeFrom(d.DeepCopy())
	if d.Spec.Template.Annotations == nil {
		d.Spec.Template.Annotations = map[string]string{}
	}
	d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = time.Now().Format(time.RFC3339Nano)
	require.NoError(t, admin.Patch(ctx, d, patch))
	want := *d.Spec.Replicas
	require.Eventually(t, func() bool {
		got := &appsv1.Deployment{}
		if admin.Get(ctx, client.ObjectKeyFromObject(d), got) != nil {
			return false
		}
		s := got.Status
		return s.ObservedGeneration >= got.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
	}, 3*time.Minute, 500*time.Millisecond, "the rollout completes")
	scaleWebhook(t, want) // and the old pods are gone
}

func TestWebhookPodsRestartedWhileRunnersComeAndGoLoseNothing(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	var (
		mu          sync.Mutex
		created     []*corev1.Pod
		uninjected  []string
		createFails []string
	)
	// Runner pods are created one after another until the rollout is over
	// and a few more after it, however long the rollout takes here; each
	// create notes whether the rollout was under way.
	var rolling, during atomic.Int32
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
			// The webhook's pods, so the rolling restart is the webhook's.
			pod := webhookOnly(runnerPod(ns, fmt.Sprintf("r-%03d", i), "64Mi", "job", "2"))
			r := rolling.Load()
			err := admin.Create(ctx, pod)
			if r == 1 && rolling.Load() == 1 {
				during.Add(1)
			}
			mu.Lock()
			switch {
			case err != nil:
				createFails = append(createFails, err.Error())
			case !injected(pod):
				uninjected = append(uninjected, pod.Name)
				created = append(created, pod)
			default:
				created = append(created, pod)
			}
			mu.Unlock()
		}
	}()
	waitCreated := func(n int) {
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(created)+len(createFails) >= n },
			2*time.Minute, 100*time.Millisecond)
	}
	waitCreated(3)
	began := time.Now()
	rolling.Store(1)
	restartWebhook(t)
	rolling.Store(2)
	t.Logf("webhook pods replaced in %s", time.Since(began).Round(100*time.Millisecond))
	mu.Lock()
	after := len(created) + len(createFails)
	mu.Unlock()
	waitCreated(after + 3)
	close(stop)
	<-done

	t.Logf("%d runner pods created across the restart, %d while it was under way", len(created), during.Load())
	assert.Empty(t, createFails, "every runner pod was created")
	assert.Empty(t, uninjected, "every runner pod got the vitals sidecar")
	require.Positive(t, during.Load(), "pods were created while the webhook pods were being replaced")

	for _, pod := range created {
		pod = waitPod(t, pod, "the runner's end", 2*time.Minute, finished)
		require.NoError(t, as(t, reaper).Delete(ctx, pod), "a finished runner's pod may go")
	}
	for _, pod := range created {
		var recs []death.Record
		require.Eventually(t, func() bool {
			recs = deathRecords(t, pod)
			return len(recs) > 0
		}, 30*time.Second, 500*time.Millisecond, "the death of %s is on record", pod.Name)
		assert.Len(t, recs, 1, "one death, one record: %s", pod.Name)
		assert.Equal(t, string(death.CleanExit), recs[0].Class)
	}
}
