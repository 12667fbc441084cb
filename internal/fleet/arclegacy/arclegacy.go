// Package arclegacy is legacy (summerwind) ARC as a fleet: runner pods of
// Runner objects (runner plus docker) or of RunnerSets, which its
// controller annotates once the runner is unregistered and can take no
// job.
package arclegacy

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Name is the preset's name.
const Name runnerpod.PresetName = "arc-legacy"

// Legacy ARC's own marks.
const (
	// Unregistered is set by legacy ARC once the runner has been
	// unregistered from GitHub: it can take no job, so it is idle.
	Unregistered = "actions-runner/unregistration-complete-timestamp"
	// RunnerSetLabel is set by legacy ARC on the pods of a RunnerSet (a
	// StatefulSet's, with no summerwind owner of their own), so that such
	// a pod is legacy ARC's from its creation, docker sidecar or not, and
	// its controller's unregistration annotation does not change its
	// preset.
	RunnerSetLabel = "runnerset-name"
	// Group is the API group of legacy ARC's Runner objects.
	Group = "actions.summerwind.dev"
	// Controller is legacy ARC's controller as its documented install
	// names it (release actions-runner-controller in namespace
	// actions-runner-system): it writes the unregistration annotation. It
	// is not trusted by default: a ServiceAccount named here would be
	// trusted to whoever may create its namespace on a cluster without
	// legacy ARC. An operator who runs legacy ARC names it in the preset's
	// controllerPrincipals.
	Controller = "system:serviceaccount:actions-runner-system:actions-runner-controller"
)

// Fleet is legacy ARC.
type Fleet struct{ fleet.Quiet }

var _ fleet.Fleet = Fleet{}

// Name is the preset's name.
func (Fleet) Name() runnerpod.PresetName { return Name }

// Defaults: a GitHub runner's.
func (Fleet) Defaults() runnerpod.Preset { return fleet.GitHubRunner() }

// Fits: the unregistration annotation, the docker sidecar, a RunnerSet's
// label or a summerwind owner.
func (Fleet) Fits(pod *corev1.Pod) bool {
	if _, ok := pod.Annotations[Unregistered]; ok || runnerpod.HasContainer(pod, "docker") {
		return true
	}
	if _, ok := pod.Labels[RunnerSetLabel]; ok {
		return true
	}
	for _, o := range pod.OwnerReferences {
		if gv, err := schema.ParseGroupVersion(o.APIVersion); err == nil && gv.Group == Group {
			return true
		}
	}
	return false
}

// Idle: unregistered, by the annotation only its controller may set.
func (Fleet) Idle(pod *corev1.Pod, _ runnerpod.JobSignal, _ time.Time) (runnerpod.Rule, string) {
	if ts, ok := pod.Annotations[Unregistered]; ok {
		return runnerpod.RuleIdle, "the runner was unregistered at " + ts
	}
	return "", ""
}

// Sample gives the pod a RunnerSet's label.
func (Fleet) Sample(pod *corev1.Pod) {
	pod.Labels = map[string]string{RunnerSetLabel: "runnerguard-check"}
}

// Traits: its idle signal, which only its controller may write, needs
// that controller named.
func (Fleet) Traits() fleet.Traits {
	runnerSet := fmt.Sprintf(fleet.LabelPath, RunnerSetLabel)
	unregistered := fmt.Sprintf(fleet.AnnotationPath, Unregistered)
	return fleet.Traits{
		MarkLabels:      []string{RunnerSetLabel},
		MarkAnnotations: []string{Unregistered},
		Chart: fleet.Chart{
			Fits:             fmt.Sprintf("%%[1]s%s.hasValue() || %%[1]s.spec.containers.exists(c, c.name == %q) || %%[1]s%s.hasValue() || %%[1]s.metadata.?ownerReferences.orValue([]).exists(r, r.apiVersion.matches(%q))", unregistered, "docker", runnerSet, "^actions[.]summerwind[.]dev/[^/]*$"),
			Marks:            []fleet.ChartMark{{Path: runnerSet}, {Path: unregistered, Presence: true}},
			Signal:           &fleet.ChartSignal{Path: unregistered, Message: "only legacy ARC's controller (presets.arc-legacy.controllerPrincipals) or the garbage collector may change actions-runner/unregistration-complete-timestamp, the runner's idle signal"},
			NeedsControllers: "legacy ARC's controller, the only writer of its runners' idle signal (e.g. " + Controller + "); without it legacy ARC's own scale-down would be refused until maxProtected",
		},
	}
}
