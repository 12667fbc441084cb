// Package tekton is Tekton Pipelines as a fleet: one pod per TaskRun
// (github.com/tektoncd/pipeline, pkg/pod/pod.go), its steps the
// containers "step-<name>" ("step-unnamed-<i>" for a step without one),
// all started at once, each waiting on the one before through the
// entrypoint's files. The controller deletes the pod when the TaskRun is
// cancelled, times out or fails (failTaskRun); a TaskRun that ends well
// keeps its pod, Succeeded, until the TaskRun itself is removed.
package tekton

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Name is the preset's name.
const Name runnerpod.PresetName = "tekton"

// The controller's labels on a TaskRun's pod (pkg/pod/pod.go makeLabels,
// pkg/apis/pipeline/register.go): the TaskRun, always; the PipelineRun
// and its task when the TaskRun is one of a PipelineRun's.
const (
	TaskRunLabel     = "tekton.dev/taskRun"
	TaskRunUIDLabel  = "tekton.dev/taskRunUID"
	PipelineRunLabel = "tekton.dev/pipelineRun"
	PipelineLabel    = "tekton.dev/pipeline"
)

// TaskRun is the pod's controlling owner, whose Succeeded condition is
// Tekton's own account of the TaskRun (pkg/apis/pipeline/v1 taskrun_types.go:
// Unknown while it runs; True, or False with a reason such as
// TaskRunCancelled, TaskRunTimeout or Failed, once it ended).
var TaskRun = fleet.ChartResource{Kind: "TaskRun", Group: "tekton.dev", Version: "v1", Resource: "taskruns"}

// StepPrefix begins every step container's name (pkg/pod/entrypoint.go
// stepPrefix); the task's author names the rest.
const StepPrefix = "step-"

// Fleet is Tekton's TaskRun pods: a pod exists for its TaskRun, whose end
// the controller makes by deleting it (no idle signal: a step waiting for
// the one before is running, and the TaskRun is under way).
type Fleet struct{ fleet.Quiet }

var _ fleet.Fleet = Fleet{}

// mark tells the fleet's pods from others.
const mark = fleet.OwnLabel(TaskRunLabel)

// Name is the preset's name.
func (Fleet) Name() runnerpod.PresetName { return Name }

// Defaults: every step container, the job read from the controller's
// labels, capped at 168h. Tekton has no longest timeout of its own (a
// timeout of 0 runs for ever); a TaskRun's own timeout ends protection
// sooner, through the pod's activeDeadlineSeconds (1.5 times the
// timeout, pkg/pod/pod.go deadlineFactor).
func (Fleet) Defaults() runnerpod.Preset {
	return runnerpod.Preset{RunnerContainers: []string{StepPrefix + runnerpod.AnyRest}, MaxProtected: metav1.Duration{Duration: 168 * time.Hour},
		Job: runnerpod.JobKeys{
			ID: runnerpod.PodKey{Label: TaskRunUIDLabel}, Name: runnerpod.PodKey{Label: TaskRunLabel},
			Project: runnerpod.PodKey{Label: PipelineRunLabel},
		}}
}

// Fits: the TaskRun label, which the controller sets on every TaskRun
// pod and on no other pod it makes (its affinity assistants carry the
// PipelineRun's only).
func (Fleet) Fits(pod *corev1.Pod) bool { return mark.On(pod) }

// JobStart is the pod's start: it exists for one TaskRun.
func (Fleet) JobStart(pod *corev1.Pod) *metav1.Time { return fleet.PodStart(pod) }

// Sample gives the pod the TaskRun label.
func (Fleet) Sample(pod *corev1.Pod) { mark.Put(pod, "runnerguard-check") }

// Traits: the controller that created the pod ends its TaskRun by
// deleting it, from its own namespace (tekton-pipelines); the step
// containers are one TaskRun's steps, in order; a death is told on the
// TaskRun too, where `tkn taskrun describe` and the dashboard show it; the
// labels that name the TaskRun are the controller's word, kept as created;
// the record keeps the TaskRun's own account beside its class.
func (Fleet) Traits() fleet.Traits {
	return fleet.Traits{
		MarkLabels:  []string{TaskRunLabel},
		Owner:       fleet.Owner{EndsJob: true},
		OneJob:      true,
		ToldOnOwner: true,
		OwnView:     &fleet.OwnView{Owner: TaskRun, Conditions: []string{"Succeeded"}, PodName: []string{"status", "podName"}},
		Chart:       mark.Chart(),
	}
}
