// Package arcscaleset is GitHub ARC's runner scale sets as a fleet: a
// runner pod owned by an EphemeralRunner, whose status carries the job
// ARC's listener assigned, read from ARC's own source
// (actions.github.com/v1alpha1, ephemeralrunner_controller.go).
package arcscaleset

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Name is the preset's name.
const Name runnerpod.PresetName = "arc-scale-set"

// ARC's own marks and objects.
const (
	// Label is set to "True" by ARC's scale-set controller on every
	// ephemeral runner pod (actions.github.com resource builder).
	Label = "actions-ephemeral-runner"
	// Group and Kind identify the owner of a scale-set runner pod, whose
	// status carries the assigned job.
	Group = "actions.github.com"
	Kind  = "EphemeralRunner"
	// Resource is the EphemeralRunner's resource name, whose deletions the
	// guard notes.
	Resource = "ephemeralrunners"
	// RegistrationFinalizer is on every EphemeralRunner from its first
	// reconcile. Once the EphemeralRunner's deletion began, ARC's controller
	// asks the Actions service to remove the runner (RemoveRunner, which the
	// service refuses with JobStillRunning while the runner's job runs) and
	// removes this finalizer only after the service accepted; only then does
	// it delete the pod (ephemeralrunner_controller.go in ARC 0.14 and its
	// main branch). A deleting EphemeralRunner without it is ARC saying the
	// job is over.
	RegistrationFinalizer = "ephemeralrunner.actions.github.com/runner-registration-finalizer"
)

// GVK is ARC's EphemeralRunner, the record of one scale-set runner and its
// job; GVR its resource.
var (
	GVK = schema.GroupVersionKind{Group: Group, Version: "v1alpha1", Kind: Kind}
	GVR = schema.GroupVersionResource{Group: Group, Version: "v1alpha1", Resource: Resource}
)

// Fleet is ARC's runner scale sets.
type Fleet struct{}

var _ fleet.Fleet = Fleet{}

// Name is the preset's name.
func (Fleet) Name() runnerpod.PresetName { return Name }

// Defaults: a GitHub runner's.
func (Fleet) Defaults() runnerpod.Preset { return fleet.GitHubRunner() }

// Fits: ARC's label, or an EphemeralRunner as the pod's controller.
func (Fleet) Fits(pod *corev1.Pod) bool {
	_, ok := pod.Labels[Label]
	return ok || OwnerName(pod) != ""
}

// Idle: the EphemeralRunner never had a job, or ARC removed the runner
// from the Actions service (JobOver).
func (Fleet) Idle(_ *corev1.Pod, job runnerpod.JobSignal, _ time.Time) (runnerpod.Rule, string) {
	switch job {
	case runnerpod.JobOver:
		return runnerpod.RuleJobOver, "the runner has no job left: ARC removed it from the Actions service, which refuses while a job runs (its EphemeralRunner is being deleted without " + RegistrationFinalizer + ")"
	case runnerpod.JobNone:
		return runnerpod.RuleIdle, "the EphemeralRunner has no job assigned"
	}
	return "", ""
}

// JobStart is when the leader saw the pod's EphemeralRunner turn busy
// (runnerpod.JobAssignedAt, which only runnerguard writes).
func (Fleet) JobStart(pod *corev1.Pod) *metav1.Time {
	if at, err := time.Parse(time.RFC3339, pod.Annotations[runnerpod.JobAssignedAt]); err == nil {
		return &metav1.Time{Time: at}
	}
	return nil
}

// Sample gives the pod ARC's label.
func (Fleet) Sample(pod *corev1.Pod) { pod.Labels = map[string]string{Label: "runnerguard-check"} }

// Traits: ARC's label decides the preset and only ARC's controller may
// change it, as its registration finalizer on an EphemeralRunner; a death
// is told on the workflow run's commit.
func (Fleet) Traits() fleet.Traits {
	label := fmt.Sprintf(fleet.LabelPath, Label)
	return fleet.Traits{
		MarkLabels: []string{Label},
		ToldOn:     fleet.GitHubCheckRun,
		RecordKind: Kind,
		Zombies:    zombies,
		// ARC re-creates a pod gone from its EphemeralRunner's Secret: only
		// the EphemeralRunner's deletion ends the runner.
		ZombieEndedByRecord: true,
		RecordDeleted:       "ARC deletes this pod itself once the Actions service accepts the runner's removal, which it does when the job ends",
		Chart: fleet.Chart{
			Fits:        fmt.Sprintf("%%[1]s%s.hasValue() || %%[1]s.metadata.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false) && r.kind == %q && r.apiVersion.matches(%q))", label, Kind, "^actions[.]github[.]com/[^/]*$"),
			Marks:       []fleet.ChartMark{{Path: label}},
			Signal:      &fleet.ChartSignal{Path: label, Message: "only ARC's controller (presets.arc-scale-set.controllerPrincipals) or the garbage collector may change the label actions-ephemeral-runner, which decides the runner's preset"},
			OwnerRecord: &fleet.ChartResource{Kind: Kind, Group: Group, Version: GVK.Version, Resource: Resource},
			RecordFinalizer: &fleet.ChartSignal{Path: RegistrationFinalizer, Message: "only ARC's controller (presets.arc-scale-set.controllerPrincipals), the garbage collector or a cluster admin may remove " +
				RegistrationFinalizer + ", whose removal says the runner's job is over (ARC removes it once the Actions service let the runner go)"},
		},
	}
}
