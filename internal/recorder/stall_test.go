package recorder

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// withSidecar is a running runner pod whose vitals sidecar started at
// started, ready or not as the kubelet last probed it.
func withSidecar(name string, started time.Time, ready bool) *corev1.Pod {
	pod := podtest.Runner("ci", name).Running("runner").Obj()
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{
		Name: runnerpod.VitalsContainer, ContainerID: "containerd://vitals-1", Ready: ready, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Time{Time: started}}},
	}}
	return pod
}

func TestStalled(t *testing.T) {
	now := podtest.Start.Add(time.Hour)
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"a sidecar the kubelet finds not ready, running past the span, says the pod stalls", withSidecar("r", podtest.Start, false), true},
		{"a ready sidecar says no stall", withSidecar("r", podtest.Start, true), false},
		{"a sidecar not yet ready within the span of its start is its first probe, not a stall", withSidecar("r", now.Add(-20*time.Second), false), false},
		{"a terminating pod's sidecar is stopping, not stalled", func() *corev1.Pod {
			p := withSidecar("r", podtest.Start, false)
			p.DeletionTimestamp = &metav1.Time{Time: now}
			return p
		}(), false},
		{"a sidecar not running says nothing", func() *corev1.Pod {
			p := withSidecar("r", podtest.Start, false)
			p.Status.InitContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
			return p
		}(), false},
		{"a pod without the sidecar is never judged", podtest.Runner("ci", "r").Running("runner").Obj(), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Stalled(tc.pod, now))
			assert.Equal(t, tc.want, Stalled(stripped(t, tc.pod), now), "read the same through the watcher's cache")
		})
	}
}

func TestAStalledRunnerRaisesOneEventAndIsCounted(t *testing.T) {
	stallsTotal.Reset()
	stalledGauge.Reset()
	stalled := withSidecar("r", podtest.Start, false)
	w := newWatcher(t, stalled)
	now := podtest.Start.Add(time.Hour)
	w.Now = func() time.Time { return now }

	reconcileOnce(t, w, stalled)
	reconcileOnce(t, w, stalled)
	assert.Equal(t, []string{"Warning RunnerStalled the vitals sidecar judges the pod stalled at its memory limit (reclaiming in a loop, no progress, no OOM kill): raise the limit, or move the job to a bigger lane; its readings: kubectl logs r -c runnerguard-vitals"},
		notified(w), "once per stall")
	assert.Equal(t, 1.0, testutil.ToFloat64(stallsTotal.WithLabelValues("ci")))
	assert.Equal(t, 1.0, testutil.ToFloat64(stalledGauge.WithLabelValues("ci")))

	update(t, w, withSidecar("r", podtest.Start, true))
	reconcileOnce(t, w, stalled)
	assert.Equal(t, 0.0, testutil.ToFloat64(stalledGauge.WithLabelValues("ci")), "recovered")

	now = now.Add(time.Minute)
	update(t, w, stalled)
	reconcileOnce(t, w, stalled)
	assert.Empty(t, notified(w), "a stall again within the cooldown raises no second Event")
	assert.Equal(t, 2.0, testutil.ToFloat64(stallsTotal.WithLabelValues("ci")), "but is counted")

	update(t, w, withSidecar("r", podtest.Start, true))
	reconcileOnce(t, w, stalled)
	now = now.Add(stallCooldown)
	update(t, w, stalled)
	reconcileOnce(t, w, stalled)
	assert.Len(t, notified(w), 1, "after the cooldown a new stall raises an Event again")

	assert.NoError(t, w.Pods.informer.GetIndexer().Delete(&cachedPod{ObjectMeta: stalled.ObjectMeta}))
	reconcileOnce(t, w, stalled)
	assert.Equal(t, 0.0, testutil.ToFloat64(stalledGauge.WithLabelValues("ci")), "a removed pod stalls no more")
}

func TestAFleetWideStallRaisesBoundedEvents(t *testing.T) {
	var s stallNotes
	at := podtest.Start
	events := 0
	for i := range 200 {
		fresh, event := s.observe(types.NamespacedName{Namespace: "ci", Name: fmt.Sprint("r", i)}, true, at)
		assert.True(t, fresh, "every stall is counted")
		if event {
			events++
		}
	}
	assert.Equal(t, 50, events, "the burst, then one a second")
	_, event := s.observe(types.NamespacedName{Namespace: "ci", Name: "late"}, true, at.Add(time.Second))
	assert.True(t, event)
	assert.Equal(t, 201, s.count("ci"))
}
