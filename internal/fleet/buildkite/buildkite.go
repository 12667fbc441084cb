// Package buildkite is Buildkite's agent-stack-k8s as a fleet: one
// Kubernetes Job per Buildkite job (github.com/buildkite/agent-stack-k8s,
// internal/controller/scheduler/scheduler.go), whose pod the job
// controller creates with the command containers ("container-<n>"
// unless the pipeline named them), the agent ("agent") that acquires the
// job and runs it in them, and "checkout". A running job is cancelled
// through its agent, never by a delete; the stack deletes only pods still
// pending.
package buildkite

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Name is the preset's name.
const Name runnerpod.PresetName = "buildkite"

// The stack's marks on a job's Kubernetes Job, which its pod carries too
// (internal/controller/config/config.go): the job's UUID, set after any
// label the pipeline asked for, and its URL, pipeline and step.
const (
	JobUUIDLabel           = "buildkite.com/job-uuid"
	JobURLAnnotation       = "buildkite.com/job-url"
	PipelineSlugAnnotation = "buildkite.com/pipeline-slug"
	StepKeyAnnotation      = "buildkite.com/step-key"
)

// The containers the stack writes (scheduler.go): the agent, the checkout
// and the default command containers' prefix.
const (
	Agent           = "agent"
	Checkout        = "checkout"
	CommandPrefix   = "container-"
	deadlineDefault = 21600 * time.Second // cmd/controller/flags.go job-active-deadline-seconds
)

// Fleet is Buildkite's job pods.
type Fleet struct{ fleet.Quiet }

var _ fleet.Fleet = Fleet{}

// mark tells the fleet's pods from others.
const mark = fleet.OwnLabel(JobUUIDLabel)

// Name is the preset's name.
func (Fleet) Name() runnerpod.PresetName { return Name }

// Defaults: the command containers, the agent and the checkout, the job
// read from the stack's marks, capped at the stack's default Job deadline
// (6h): past it, the job controller deletes the pod, and Buildkite's own
// job timeout runs in the agent. A stack with another
// job-active-deadline-seconds sets maxProtected to it.
func (Fleet) Defaults() runnerpod.Preset {
	return runnerpod.Preset{RunnerContainers: []string{CommandPrefix + runnerpod.AnyRest, Agent, Checkout}, MaxProtected: metav1.Duration{Duration: deadlineDefault},
		Job: runnerpod.JobKeys{
			ID: runnerpod.PodKey{Label: JobUUIDLabel}, URL: runnerpod.PodKey{Annotation: JobURLAnnotation},
			Project: runnerpod.PodKey{Annotation: PipelineSlugAnnotation}, Name: runnerpod.PodKey{Annotation: StepKeyAnnotation},
		}}
}

// Fits: the job-uuid label.
func (Fleet) Fits(pod *corev1.Pod) bool { return mark.On(pod) }

// Idle: the job is over once the agent ended: the stack then has the job
// controller kill what still runs (completions.go).
func (Fleet) Idle(pod *corev1.Pod, _ runnerpod.JobSignal, _ time.Time) (runnerpod.Rule, string) {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == Agent && cs.State.Terminated != nil {
			return runnerpod.RuleJobOver, fmt.Sprintf("the Buildkite agent ended (exit code %d): the job is over", cs.State.Terminated.ExitCode)
		}
	}
	return "", ""
}

// JobStart is the pod's start: it exists for one job.
func (Fleet) JobStart(pod *corev1.Pod) *metav1.Time { return fleet.PodStart(pod) }

// Sample gives the pod the job-uuid label.
func (Fleet) Sample(pod *corev1.Pod) { mark.Put(pod, "runnerguard-check") }

// Traits: no owner ends a running job by a delete (the job controller
// does at the Job's deadline or on its suspension, which anyone who may
// edit the Job could bring on, so it is no owner); the containers are one
// job's parts; the marks that name the job are the stack's word, kept as
// created; the record keeps the Kubernetes Job's own account (Complete, or
// Failed with its reason: DeadlineExceeded, BackoffLimitExceeded) beside
// its class; a death is told as an annotation on the job's build.
func (Fleet) Traits() fleet.Traits {
	return fleet.Traits{
		MarkLabels: []string{string(mark)},
		OneJob:     true,
		OwnView:    &fleet.OwnView{Owner: KubernetesJob, Conditions: []string{"Failed", "Complete"}, Creators: JobController},
		ToldOn:     fleet.BuildkiteAnnotation,
		Chart:      mark.Chart(),
	}
}

// JobController is who creates a Job's pods: kube-controller-manager's
// job controller, with its own credentials or the manager's.
var JobController = []string{"system:serviceaccount:kube-system:job-controller", "system:kube-controller-manager"}

// KubernetesJob is the pod's controlling owner: the stack makes one
// batch/v1 Job per Buildkite job.
var KubernetesJob = fleet.ChartResource{Kind: "Job", Group: "batch", Version: "v1", Resource: "jobs"}
