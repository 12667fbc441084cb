// Package arcworkflow is the "<runner-pod>-workflow" job pod of ARC's
// container mode "kubernetes" as a fleet: the runner's container hooks
// create it for one job (container "job", label runner-pod, no owner) and
// delete it, with grace 0, when the job ends.
package arcworkflow

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Name is the preset's name.
const Name runnerpod.PresetName = "arc-workflow"

// PodLabel names the runner pod on the workflow pod the hooks create.
const PodLabel = "runner-pod"

// Fleet is ARC's workflow pods: the pod exists for its job, which its
// runner ends (no idle signal).
type Fleet struct{ fleet.Quiet }

var _ fleet.Fleet = Fleet{}

// Name is the preset's name.
func (Fleet) Name() runnerpod.PresetName { return Name }

// Defaults: the container "job", capped at 120h: a workflow pod starts
// with its job, which runs for at most 5 days on a self-hosted runner
// ("Usage limits for self-hosted runners", docs.github.com).
func (Fleet) Defaults() runnerpod.Preset {
	return runnerpod.Preset{RunnerContainers: []string{"job"}, MaxProtected: metav1.Duration{Duration: 120 * time.Hour}}
}

// Fits: the runner-pod label.
func (Fleet) Fits(pod *corev1.Pod) bool {
	_, ok := pod.Labels[PodLabel]
	return ok
}

// Sample gives the pod the runner-pod label.
func (Fleet) Sample(pod *corev1.Pod) { pod.Labels = map[string]string{PodLabel: "runnerguard-check"} }

// Traits: the runner that created the pod ends its job, with its own
// pod's token; the label decides the preset and only ARC's runners may
// change it.
func (Fleet) Traits() fleet.Traits {
	label := fmt.Sprintf(fleet.LabelPath, PodLabel)
	return fleet.Traits{
		MarkLabels: []string{PodLabel},
		Owner:      fleet.Owner{EndsJob: true, RunnerPodLabel: PodLabel},
		Chart: fleet.Chart{
			Fits:   "%[1]s" + label + ".hasValue()",
			Marks:  []fleet.ChartMark{{Path: label}},
			Signal: &fleet.ChartSignal{Path: label, Message: "only ARC's runners (presets.arc-workflow.controllerPrincipals) or the garbage collector may change the label runner-pod, which decides the pod's preset"},
		},
	}
}
