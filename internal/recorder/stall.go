package recorder

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify"
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

// Recovered reports whether pod's stall is over with the pod running on:
// its vitals sidecar runs and the kubelet finds it ready again. A pod
// ending is not a recovery: its death, if told, completes the stall's
// report.
func Recovered(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if cs.Name == runnerpod.VitalsContainer {
			return cs.State.Running != nil && cs.Ready
		}
	}
	return false
}

// stallLook is what a look at a runner pod says of its stall.
type stallLook int

const (
	// stallUnknown: no judgement now (no sidecar, a sidecar starting or
	// restarting, a pod ending).
	stallUnknown stallLook = iota
	stallNow
	stallOver
)

func lookAt(pod *corev1.Pod, now time.Time) stallLook {
	switch {
	case Stalled(pod, now):
		return stallNow
	case Recovered(pod):
		return stallOver
	}
	return stallUnknown
}

// toldStall is a stall whose report was opened: it is completed when the
// leader sees the stall end.
type toldStall struct {
	uid   types.UID
	began time.Time
}

// stallNotes keeps which runner pods are stalled now, when each last got
// an Event, and which stalls were told on the job's commit. Its zero
// value is ready.
type stallNotes struct {
	mu sync.Mutex
	// now holds the pods stalled now, by namespace for the gauge.
	now map[types.NamespacedName]bool
	// told is when each pod last got an Event.
	told map[types.NamespacedName]time.Time
	// open are the stalls told (their Event raised) and not yet seen to
	// end.
	open map[types.NamespacedName]toldStall
	// fleet bounds the Events of a fleet-wide stall (a node's memory
	// exhausted) so they cannot swamp the API server, nor its reports
	// GitHub or GitLab.
	fleet *rate.Limiter
}

// stallStep is what one look calls for.
type stallStep struct {
	// fresh: a new stall (count it); event: raise its Event and tell it.
	fresh, event bool
	// ended is the told stall that ended: recovered when the pod runs on,
	// else a pod of the name before this one.
	ended     *toldStall
	recovered bool
}

// observe notes what a look at pod (its UID uid) says at t.
func (s *stallNotes) observe(pod types.NamespacedName, uid types.UID, look stallLook, t time.Time) stallStep {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Every look sets the gauge, not only a change: a namespace's series
	// shows 0 once a runner there has been looked at.
	defer s.gaugeLocked(pod.Namespace)
	if s.now == nil {
		s.now, s.told, s.open = map[types.NamespacedName]bool{}, map[types.NamespacedName]time.Time{}, map[types.NamespacedName]toldStall{}
		s.fleet = rate.NewLimiter(rate.Every(time.Second), 50)
	}
	var step stallStep
	if o, ok := s.open[pod]; ok && o.uid != uid {
		// A pod recreated under the name: its predecessor's stall ended
		// with it.
		delete(s.open, pod)
		step.ended = &o
	}
	if look != stallNow {
		delete(s.now, pod)
		if o, ok := s.open[pod]; ok && look == stallOver {
			delete(s.open, pod)
			step.ended, step.recovered = &o, true
		}
		return step
	}
	if s.now[pod] {
		return step
	}
	s.now[pod] = true
	step.fresh = true
	if last, ok := s.told[pod]; ok && t.Sub(last) < stallCooldown {
		return step
	}
	if !s.fleet.AllowN(t, 1) {
		return step
	}
	s.told[pod] = t
	// The sidecar judges a stall once it has held for its span.
	s.open[pod] = toldStall{uid: uid, began: t.Add(-stall.Default.Span)}
	step.event = true
	return step
}

// forget drops a removed pod, and says the stall it leaves open, if any.
func (s *stallNotes) forget(pod types.NamespacedName) *toldStall {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.gaugeLocked(pod.Namespace)
	delete(s.now, pod)
	delete(s.told, pod)
	o, ok := s.open[pod]
	if !ok {
		return nil
	}
	delete(s.open, pod)
	return &o
}

// gaugeLocked sets the gauge of namespace's stalled pods while the notes
// are locked: a count taken, then set after the lock is let go, can be
// overtaken by a newer one from another worker and left behind it.
func (s *stallNotes) gaugeLocked(namespace string) {
	stalledGauge.WithLabelValues(namespace).Set(float64(s.countLocked(namespace)))
}

// countLocked is the number of pods stalled now in namespace.
func (s *stallNotes) countLocked(namespace string) int {
	n := 0
	for p := range s.now {
		if p.Namespace == namespace {
			n++
		}
	}
	return n
}

// checkStall raises a runner pod's stall: the metric at once, a Warning
// Event and its report on the job's commit unless rate-limited; and tells
// the end of a stall told.
func (w *Watcher) checkStall(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) {
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	now := w.Now()
	step := w.stalls.observe(key, pod.UID, lookAt(pod, now), now)
	if o := step.ended; o != nil && w.StallReports != nil {
		phase := notify.StallEnded
		if step.recovered {
			phase = notify.StallRecovered
		}
		w.StallReports.End(stallOf(pod.Namespace, pod.Name, o, phase, now))
	}
	if !step.fresh {
		return
	}
	stallsTotal.WithLabelValues(pod.Namespace).Inc()
	logf.FromContext(ctx).Info("runner stalled at its memory limit", "event", step.event)
	if !step.event {
		return
	}
	w.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonStalled, "Stall",
		"the vitals sidecar judges the pod stalled at its memory limit (reclaiming in a loop, no progress, no OOM kill): raise the limit, or move the job to a bigger lane; its readings: kubectl logs %s -c %s", pod.Name, runnerpod.VitalsContainer)
	if w.StallReports != nil {
		o := toldStall{uid: pod.UID, began: now.Add(-stall.Default.Span)}
		s := stallOf(pod.Namespace, pod.Name, &o, notify.StallUnderWay, now)
		s.Record.Preset = string(runner.Preset.Name)
		w.StallReports.Stalled(ctx, s, w.stallFacts(pod, runner))
	}
}

// stallOf is the stall o of the pod, as the reports tell it.
func stallOf(namespace, name string, o *toldStall, phase string, at time.Time) notify.Stall {
	return notify.Stall{Record: death.Record{Namespace: namespace, DeathRecord: v1alpha1.DeathRecord{Pod: name, UID: string(o.uid)}},
		Phase: phase, Began: o.began, At: at}
}

// stallFacts reads, when the stall is told and off the watcher's path,
// the pod's job as its death's record would name it, and the runner
// container's memory limit (which the watcher's cache does not keep).
func (w *Watcher) stallFacts(pod *corev1.Pod, runner runnerpod.Runner) notify.StallFacts {
	return func(ctx context.Context) (*v1alpha1.Job, int64) {
		job := w.job(ctx, pod, runner)
		full := &corev1.Pod{}
		if err := w.Reader.Get(ctx, client.ObjectKeyFromObject(pod), full); err != nil || full.UID != pod.UID {
			return job, 0
		}
		return job, RunnerLimit(full, runner)
	}
}

// RunnerLimit is the memory limit of the pod's first runner container in
// bytes, 0 when it sets none.
func RunnerLimit(pod *corev1.Pod, runner runnerpod.Runner) int64 {
	for _, c := range pod.Spec.Containers {
		if len(runner.Containers) > 0 && c.Name == runner.Containers[0] {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				return q.Value()
			}
		}
	}
	return 0
}

// StallReporter tells stalls on the jobs' commits (notify.StallTeller):
// it takes each transition and returns at once.
type StallReporter interface {
	Stalled(ctx context.Context, s notify.Stall, facts notify.StallFacts)
	End(s notify.Stall)
}

// setupStallReports makes the stall reporter when reports go to GitHub or
// GitLab and none was given, and runs it with mgr (on the leader).
func (w *Watcher) setupStallReports(mgr ctrl.Manager) error {
	r := w.Config.Reports
	if w.StallReports != nil || !r.Enabled() || (r.GitHub == nil && r.GitLab == nil) {
		return nil
	}
	senders := w.Senders
	if senders == nil {
		senders = notify.Senders(r, mgr.GetAPIReader(), nil, w.Now)
	}
	t := &notify.StallTeller{Config: r, Senders: senders}
	w.StallReports = t
	return mgr.Add(t)
}

// forgetStall drops a removed pod's stall, and hands over the end of a
// stall told that no look saw end.
func (w *Watcher) forgetStall(pod types.NamespacedName) {
	o := w.stalls.forget(pod)
	if o != nil && w.StallReports != nil {
		w.StallReports.End(stallOf(pod.Namespace, pod.Name, o, notify.StallEnded, w.Now()))
	}
}
