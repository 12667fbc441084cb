package recorder

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/vitals/stall"
)

// ReasonStalled is the Warning Event of a runner pod stalled at its memory
// limit.
const ReasonStalled = "RunnerStalled"

// Stalled reports whether the kubelet says pod's vitals sidecar judges it
// stalled at its memory limit: the sidecar runs, its readiness probe fails,
// and it started longer ago than a stall takes to be judged (before that,
// not ready is the probe not yet passed, or its port taken, never a stall).
// Only the node's kubelet writes the ready flag; the pod writes nothing.
func Stalled(pod *corev1.Pod, now time.Time) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name != runnerpod.VitalsContainer {
			continue
		}
		run := cs.State.Running
		return run != nil && !cs.Ready && cs.Started != nil && *cs.Started && !now.Before(run.StartedAt.Add(stall.Default.Span))
	}
	return false
}

// stallCooldown is how long after a pod's stall Event another stall of the
// same pod raises none: a job at its limit can stall, recover and stall
// again every minute.
const stallCooldown = 10 * time.Minute

// stallNotes keeps which runner pods are stalled now and when each last got
// an Event. Its zero value is ready.
type stallNotes struct {
	mu sync.Mutex
	// now holds the pods stalled now, by namespace for the gauge.
	now map[types.NamespacedName]bool
	// told is when each pod last got an Event.
	told map[types.NamespacedName]time.Time
	// fleet bounds the Events of a fleet-wide stall (a node's memory
	// exhausted) so they cannot swamp the API server.
	fleet *rate.Limiter
}

// observe notes whether pod is stalled at t and says whether this is a new
// stall (count it) and whether to raise an Event for it.
func (s *stallNotes) observe(pod types.NamespacedName, stalled bool, t time.Time) (fresh, event bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.now == nil {
		s.now, s.told = map[types.NamespacedName]bool{}, map[types.NamespacedName]time.Time{}
		s.fleet = rate.NewLimiter(rate.Every(time.Second), 50)
	}
	if !stalled {
		delete(s.now, pod)
		return false, false
	}
	if s.now[pod] {
		return false, false
	}
	s.now[pod] = true
	if last, ok := s.told[pod]; ok && t.Sub(last) < stallCooldown {
		return true, false
	}
	if !s.fleet.AllowN(t, 1) {
		return true, false
	}
	s.told[pod] = t
	return true, true
}

// forget drops a removed pod.
func (s *stallNotes) forget(pod types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.now, pod)
	delete(s.told, pod)
}

// count is the number of pods stalled now in namespace.
func (s *stallNotes) count(namespace string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p := range s.now {
		if p.Namespace == namespace {
			n++
		}
	}
	return n
}

// checkStall raises a runner pod's stall: the metric at once, a Warning
// Event unless rate-limited.
func (w *Watcher) checkStall(ctx context.Context, pod *corev1.Pod) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	fresh, event := w.stalls.observe(key, Stalled(pod, w.Now()), w.Now())
	stalledGauge.WithLabelValues(pod.Namespace).Set(float64(w.stalls.count(pod.Namespace)))
	if !fresh {
		return
	}
	stallsTotal.WithLabelValues(pod.Namespace).Inc()
	logf.FromContext(ctx).Info("runner stalled at its memory limit", "event", event)
	if event {
		w.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonStalled, "Stall",
			"the vitals sidecar judges the pod stalled at its memory limit (reclaiming in a loop, no progress, no OOM kill): raise the limit, or move the job to a bigger lane; its readings: kubectl logs %s -c %s", pod.Name, runnerpod.VitalsContainer)
	}
}

// forgetStall drops a removed pod's stall.
func (w *Watcher) forgetStall(pod types.NamespacedName) {
	w.stalls.forget(pod)
	stalledGauge.WithLabelValues(pod.Namespace).Set(float64(w.stalls.count(pod.Namespace)))
}
