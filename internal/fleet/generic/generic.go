// Package generic is a home-grown pool as a fleet: a runner container that
// starts only once a poller init container got it a job, so a started
// runner is a busy one, unless the pool says it is idle (IdleAnnotation).
package generic

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Name is the preset's name.
const Name runnerpod.PresetName = "generic"

// IdleAnnotation is the pool's own idle signal, as ARC's job status is
// ARC's: "true" says its runner has no job (an always-on runner between
// jobs, a hung one the pool gave up on); an RFC 3339 time is a lease, the
// runner busy until then and idle after, which the pool moves forward
// while the job runs, so a runner the pool lost track of (a hung runner, a
// pool that died, a runner the CI service will never give a job) is let go
// when its lease lapses. A pod may carry it from its creation; after that,
// only the pool's controller (presets.generic.controllerPrincipals) or the
// garbage collector may set, change or remove it (the chart's policy), so
// a reaper cannot make a busy runner idle.
const IdleAnnotation = "runnerguard.io/idle"

// Fleet is a home-grown pool.
type Fleet struct{ fleet.Quiet }

var _ fleet.Fleet = Fleet{}

// Name is the preset's name.
func (Fleet) Name() runnerpod.PresetName { return Name }

// Defaults: a GitHub runner's, the commonest pool's.
func (Fleet) Defaults() runnerpod.Preset { return fleet.GitHubRunner() }

// Fits any pod with a runner container: the last preset tried.
func (Fleet) Fits(*corev1.Pod) bool { return true }

// Idle: the pool's IdleAnnotation; without it a started runner is busy.
func (f Fleet) Idle(pod *corev1.Pod, _ runnerpod.JobSignal, now time.Time) (runnerpod.Rule, string) {
	v := pod.Annotations[IdleAnnotation]
	if v == "true" {
		return runnerpod.RuleIdle, "the pool says the runner is idle (" + IdleAnnotation + "=true)"
	}
	if at, ok := f.IdleFrom(pod); ok && !now.Before(at) {
		return runnerpod.RuleIdle, fmt.Sprintf("the pool's lease on the runner lapsed at %s (%s), %s ago: the pool no longer says it runs a job",
			v, IdleAnnotation, now.Sub(at).Truncate(time.Second))
	}
	return "", ""
}

// IdleFrom is when the pool's lease lapses (IdleAnnotation a time).
func (Fleet) IdleFrom(pod *corev1.Pod) (time.Time, bool) {
	at, err := time.Parse(time.RFC3339, pod.Annotations[IdleAnnotation])
	return at, err == nil
}

var _ fleet.Leased = Fleet{}

// Traits: the runner waits in the poller's init container for its job; a
// pool may state its job in marks of its own (the preset's job keys), and
// its idle signal only its controller may write.
func (Fleet) Traits() fleet.Traits {
	idle := fmt.Sprintf(fleet.AnnotationPath, IdleAnnotation)
	return fleet.Traits{
		MarkAnnotations: []string{IdleAnnotation},
		GatedByInit:     true,
		Chart: fleet.Chart{JobMarks: true, Signal: &fleet.ChartSignal{Path: idle,
			Message: "only your pool's controller (presets.generic.controllerPrincipals) or the garbage collector may change " + IdleAnnotation + ", the runner's idle signal"}},
	}
}
