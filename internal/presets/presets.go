// Package presets is the list of the fleets runnerguard knows, in the
// order a pod is matched against them, and what follows from the list:
// which preset a pod is, the defaults, each question put to the pod's
// fleet (presets.go), the pod-level rules built on the answers
// (protect.go), and the chart's fleet table (chart.go). To add a fleet, add a package
// under internal/fleet that answers fleet.Fleet and a line in All; then
// `make fleet-table` regenerates the chart's table.
package presets

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/arcworkflow"
	"github.com/runnerguard/runnerguard/internal/fleet/buildkite"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/fleet/jenkins"
	"github.com/runnerguard/runnerguard/internal/fleet/tekton"
	"github.com/runnerguard/runnerguard/internal/fleet/woodpecker"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// All is every fleet, most specific first, so a pod that carries a
// fleet's own marks is never taken for a generic runner: ARC's workflow
// pods and GitLab's build pods before the runners whose container names
// they could share, generic last.
var All = []fleet.Fleet{
	arcworkflow.Fleet{},
	gitlab.Fleet{},
	arcscaleset.Fleet{},
	arclegacy.Fleet{},
	tekton.Fleet{},
	buildkite.Fleet{},
	woodpecker.Fleet{},
	jenkins.Fleet{},
	generic.Fleet{},
}

// Order is the fleets' names in All's order.
var Order = func() []runnerpod.PresetName {
	names := make([]runnerpod.PresetName, len(All))
	for i, f := range All {
		names[i] = f.Name()
	}
	return names
}()

// For is the fleet of that name; false when none is.
func For(name runnerpod.PresetName) (fleet.Fleet, bool) {
	i := slices.Index(Order, name)
	if i < 0 {
		return nil, false
	}
	return All[i], true
}

// Of is the fleet of a matched runner; a preset Match returned always has
// one.
func Of(r runnerpod.Runner) fleet.Fleet {
	f, _ := For(r.Preset.Name)
	return f
}

// Known reports whether a fleet of that name is listed.
func Known(name runnerpod.PresetName) bool { return slices.Contains(Order, name) }

// Defaults returns every fleet's preset as a plain install has it,
// enabled, in Order.
func Defaults() []runnerpod.Preset {
	ps := make([]runnerpod.Preset, len(All))
	for i, f := range All {
		ps[i] = f.Defaults()
		ps[i].Name, ps[i].Enabled = f.Name(), true
	}
	return ps
}

// Match returns the first enabled preset, in the order given, that the
// pod fits, with the pod's runner containers. A pod with no container of
// a preset's RunnerContainers never fits it; neither does a pod that
// lacks the preset's fleet's marks.
func Match(pod *corev1.Pod, ps []runnerpod.Preset) (runnerpod.Runner, bool) {
	for _, p := range ps {
		if !p.Enabled {
			continue
		}
		var names []string
		for _, c := range pod.Spec.Containers {
			if runnerpod.IsRunnerContainer(p.RunnerContainers, c.Name) {
				names = append(names, c.Name)
			}
		}
		if f, ok := For(p.Name); ok && len(names) > 0 && f.Fits(pod) {
			return runnerpod.Runner{Preset: p, Containers: names}, true
		}
	}
	return runnerpod.Runner{}, false
}

// Marks are the pod labels and annotations that any fleet's Fits and Idle
// read: a copy of a pod that keeps only these (the pod watcher's cache) is
// matched and judged as the pod is.
func Marks() (labels, annotations []string) {
	for _, f := range All {
		t := f.Traits()
		labels = append(labels, t.MarkLabels...)
		annotations = append(annotations, t.MarkAnnotations...)
	}
	return labels, annotations
}

// OwnerOf says who ends the jobs of the preset's fleet (fleet.Owner); the
// zero Owner for a name no fleet has.
func OwnerOf(name runnerpod.PresetName) fleet.Owner {
	if f, ok := For(name); ok {
		return f.Traits().Owner
	}
	return fleet.Owner{}
}

// FreeByJob is rule 6: the runner's fleet's own signal that it has no job
// (fleet.Fleet.Idle) as of now, job being the fleet's record as read.
func FreeByJob(pod *corev1.Pod, r runnerpod.Runner, job runnerpod.JobSignal, now time.Time) (runnerpod.Rule, string) {
	return Of(r).Idle(pod, job, now)
}

// Lease is when the fleet's lease on the runner's job lapses
// (fleet.Leased); false for a fleet or pod without one.
func Lease(pod *corev1.Pod, r runnerpod.Runner) (time.Time, bool) {
	if l, ok := Of(r).(fleet.Leased); ok {
		return l.IdleFrom(pod)
	}
	return time.Time{}, false
}

// Keeper is the runner's fleet as a keeper of its own records of jobs
// (fleet.RecordKeeper); false for a fleet that keeps none.
func Keeper(r runnerpod.Runner) (fleet.RecordKeeper, bool) {
	k, ok := Of(r).(fleet.RecordKeeper)
	return k, ok
}

// KeepsRecord reports whether the runner's fleet keeps its own record of
// the job.
func KeepsRecord(r runnerpod.Runner) bool {
	_, ok := Keeper(r)
	return ok
}

// Keepers are the fleets that keep their own records of jobs, in All's
// order: the leader follows each one's records.
func Keepers() []fleet.RecordKeeper {
	var ks []fleet.RecordKeeper
	for _, f := range All {
		if k, ok := f.(fleet.RecordKeeper); ok {
			ks = append(ks, k)
		}
	}
	return ks
}

// ReadRecord reads the fleet's own record of a runner's job
// (fleet.ReadRecord); JobNotRead for a fleet that keeps none.
func ReadRecord(ctx context.Context, c client.Reader, r runnerpod.Runner, pod *corev1.Pod) (fleet.Record, error) {
	if k, ok := Keeper(r); ok {
		return fleet.ReadRecord(ctx, c, k, pod)
	}
	return fleet.Record{Signal: runnerpod.JobNotRead}, nil
}

// RecordRef is the reference to the fleet's record that controls the pod,
// a zero reference for a fleet that keeps none.
func RecordRef(r runnerpod.Runner, pod *corev1.Pod) metav1.OwnerReference {
	if k, ok := Keeper(r); ok {
		return k.RecordRef(pod)
	}
	return metav1.OwnerReference{}
}
