package recorder

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/vitals/stall"
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
		step := s.observe(types.NamespacedName{Namespace: "ci", Name: fmt.Sprint("r", i)}, types.UID(fmt.Sprint("uid-", i)), stallNow, at)
		assert.True(t, step.fresh, "every stall is counted")
		if step.event {
			events++
		}
	}
	assert.Equal(t, 50, events, "the burst, then one a second")
	step := s.observe(types.NamespacedName{Namespace: "ci", Name: "late"}, "uid-late", stallNow, at.Add(time.Second))
	assert.True(t, step.event)
	assert.Equal(t, 201.0, testutil.ToFloat64(stalledGauge.WithLabelValues("ci")))
}

// The gauge is the count of the last change, whichever worker made it:
// set from a count taken before another worker's change, it stayed behind
// (a 10,000-runner run's leader counted 833 stalls with 825 on the gauge).
func TestTheStalledGaugeIsTheLastCountWhateverWorkerSetsIt(t *testing.T) {
	var s stallNotes
	at := podtest.Start
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				pod := types.NamespacedName{Namespace: "race", Name: fmt.Sprint("r", w, "-", i)}
				s.observe(pod, types.UID(pod.Name), stallNow, at)
				if i%3 == 0 {
					s.forget(pod)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, float64(8*66), testutil.ToFloat64(stalledGauge.WithLabelValues("race")))
}

func TestStallLooks(t *testing.T) {
	now := podtest.Start.Add(time.Hour)
	ending := withSidecar("r", podtest.Start, true)
	ending.DeletionTimestamp = &metav1.Time{Time: now}
	ended := podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").Obj()
	ended.Status.InitContainerStatuses = withSidecar("r", podtest.Start, true).Status.InitContainerStatuses
	restarting := withSidecar("r", podtest.Start, false)
	restarting.Status.InitContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want stallLook
	}{
		{"a sidecar not ready past its span is a stall", withSidecar("r", podtest.Start, false), stallNow},
		{"a ready sidecar of a running pod is a recovery", withSidecar("r", podtest.Start, true), stallOver},
		{"a pod being deleted has not recovered: its death tells the end", ending, stallUnknown},
		{"a pod whose runner ended has not recovered", ended, stallUnknown},
		{"a sidecar restarting says nothing", restarting, stallUnknown},
		{"a pod without the sidecar says nothing", podtest.Runner("ci", "r").Running("runner").Obj(), stallUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, lookAt(tc.pod, now))
			assert.Equal(t, tc.want, lookAt(stripped(t, tc.pod), now), "read the same through the watcher's cache")
		})
	}
}

// Each transition of a told stall is handed over once: its telling with
// its Event, its end when the pod runs on ready, or when a pod of the
// name ends or is replaced.
func TestAToldStallsEndIsHandedOverOnce(t *testing.T) {
	at := podtest.Start
	pod := types.NamespacedName{Namespace: "ci", Name: "r"}
	type look struct {
		uid  types.UID
		look stallLook
	}
	for _, tc := range []struct {
		name      string
		looks     []look
		events    int
		ends      []bool // recovered, per end handed over
		leftOpen  bool
		forgotten bool
	}{
		{"a stall, seen again, then recovered", []look{{"a", stallNow}, {"a", stallNow}, {"a", stallOver}, {"a", stallOver}}, 1, []bool{true}, false, false},
		{"a stall through a sidecar's restart, then recovered", []look{{"a", stallNow}, {"a", stallUnknown}, {"a", stallOver}}, 1, []bool{true}, false, false},
		{"a stall until the pod ends is left to the death, then to its removal", []look{{"a", stallNow}, {"a", stallUnknown}}, 1, nil, true, true},
		{"a stall, recovered, again within the cooldown: no second telling", []look{{"a", stallNow}, {"a", stallOver}, {"a", stallNow}, {"a", stallOver}}, 1, []bool{true}, false, false},
		{"a pod recreated under the name ends its predecessor's stall", []look{{"a", stallNow}, {"b", stallOver}}, 1, []bool{false}, false, false},
		{"a recovery with no stall told hands nothing over", []look{{"a", stallOver}, {"a", stallUnknown}}, 0, nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s stallNotes
			events := 0
			var ends []bool
			for i, l := range tc.looks {
				step := s.observe(pod, l.uid, l.look, at.Add(time.Duration(i)*time.Minute))
				if step.event {
					events++
				}
				if step.ended != nil {
					assert.Equal(t, types.UID("a"), step.ended.uid)
					assert.Equal(t, at.Add(-stall.Default.Span), step.ended.began)
					ends = append(ends, step.recovered)
				}
			}
			assert.Equal(t, tc.events, events)
			assert.Equal(t, tc.ends, ends)
			left := s.forget(pod)
			assert.Equal(t, tc.leftOpen, left != nil, "left open at the pod's removal")
			assert.Nil(t, s.forget(pod), "and handed over once")
		})
	}
}

// fakeStallReports keeps what the watcher hands over.
type fakeStallReports struct {
	stalls []notify.Stall
	facts  []notify.StallFacts
}

func (f *fakeStallReports) Stalled(_ context.Context, s notify.Stall, facts notify.StallFacts) {
	f.stalls, f.facts = append(f.stalls, s), append(f.facts, facts)
}
func (f *fakeStallReports) End(s notify.Stall) { f.stalls = append(f.stalls, s) }

func TestAStallIsHandedToTheReportsWithItsEventAndItsEndAfter(t *testing.T) {
	stalled := withSidecar("r", podtest.Start, false)
	stalled.UID = "uid-r"
	w := newWatcher(t, stalled)
	now := podtest.Start.Add(time.Hour)
	w.Now = func() time.Time { return now }
	reports := &fakeStallReports{}
	w.StallReports = reports

	reconcileOnce(t, w, stalled)
	reconcileOnce(t, w, stalled)
	require.Len(t, reports.stalls, 1, "told once, with its Event")
	s := reports.stalls[0]
	assert.Equal(t, notify.StallUnderWay, s.Phase)
	assert.Equal(t, "ci", s.Record.Namespace)
	assert.Equal(t, "r", s.Record.Pod)
	assert.Equal(t, "uid-r", s.Record.UID)
	assert.NotEmpty(t, s.Record.Preset)
	assert.Nil(t, s.Record.Job, "read when told, off the watcher's path")
	assert.Equal(t, now.Add(-stall.Default.Span), s.Began)

	now = now.Add(4 * time.Minute)
	ready := withSidecar("r", podtest.Start, true)
	ready.UID = "uid-r"
	update(t, w, ready)
	reconcileOnce(t, w, ready)
	reconcileOnce(t, w, ready)
	require.Len(t, reports.stalls, 2, "its end once")
	assert.Equal(t, notify.StallRecovered, reports.stalls[1].Phase)
	assert.Equal(t, now, reports.stalls[1].At)
	assert.Equal(t, s.Began, reports.stalls[1].Began)

	// A stall after the cooldown, then the pod removed while stalled.
	now = now.Add(stallCooldown)
	update(t, w, stalled)
	reconcileOnce(t, w, stalled)
	require.Len(t, reports.stalls, 3)
	require.NoError(t, w.Pods.informer.GetIndexer().Delete(&cachedPod{ObjectMeta: stalled.ObjectMeta}))
	reconcileOnce(t, w, stalled)
	reconcileOnce(t, w, stalled)
	require.Len(t, reports.stalls, 4, "its end once, at the pod's removal")
	assert.Equal(t, notify.StallEnded, reports.stalls[3].Phase)
}

func TestRunnerLimit(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Obj()
	runner := runnerpod.Runner{Containers: []string{"runner"}}
	assert.Zero(t, RunnerLimit(pod, runner), "none set")
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}
	assert.Equal(t, int64(4<<30), RunnerLimit(pod, runner))
	assert.Zero(t, RunnerLimit(pod, runnerpod.Runner{Containers: []string{"other"}}), "another container's is not the runner's")
}
