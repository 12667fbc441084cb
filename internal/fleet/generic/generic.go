// Package generic is a home-grown pool as a fleet: a runner container that
// starts only once a poller init container got it a job, so a started
// runner is a busy one.
package generic

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Name is the preset's name.
const Name runnerpod.PresetName = "generic"

// Fleet is a home-grown pool.
type Fleet struct{}

var _ fleet.Fleet = Fleet{}

// Name is the preset's name.
func (Fleet) Name() runnerpod.PresetName { return Name }

// Defaults: the container "runner" with the GitHub runner's diagnostic
// env (the commonest pool), capped at 168h as ARC's runners are.
func (Fleet) Defaults() runnerpod.Preset {
	return runnerpod.Preset{RunnerContainers: []string{"runner"}, DiagnosticEnv: runnerpod.GitHubRunnerEnv(),
		MaxProtected: metav1.Duration{Duration: 168 * time.Hour}}
}

// Fits any pod with a runner container: the last preset tried.
func (Fleet) Fits(*corev1.Pod) bool { return true }

// Idle: never; a started runner is busy.
func (Fleet) Idle(*corev1.Pod, runnerpod.JobSignal) (runnerpod.Rule, string) { return "", "" }

// JobStart: not told apart from the runner's.
func (Fleet) JobStart(*corev1.Pod) *metav1.Time { return nil }

// Sample: any pod with a runner container is one.
func (Fleet) Sample(*corev1.Pod) {}

// Traits: the runner waits in the poller's init container for its job.
// A pool may state its job in marks of its own (the preset's job keys).
func (Fleet) Traits() fleet.Traits {
	return fleet.Traits{GatedByInit: true, Chart: fleet.Chart{JobMarks: true}}
}
