// Package gitlab is GitLab Runner's Kubernetes executor as a fleet: one
// build pod per job (containers build, helper and svc-N, init
// init-permissions), which the runner manager deletes when the job ends or
// is cancelled.
package gitlab

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Name is the preset's name.
const Name runnerpod.PresetName = "gitlab"

// The executor marks its build pods with the job and project
// (docs.gitlab.com/runner/executors/kubernetes, "Default labels for job
// pods", "Default annotations for job pods").
const (
	JobIDAnnotation   = "job.runner.gitlab.com/id"
	JobNameAnnotation = "job.runner.gitlab.com/name"
	JobURLAnnotation  = "job.runner.gitlab.com/url"
	ProjectIDLabel    = "project.runner.gitlab.com/id"
)

// helper is the executor's own container beside the build's.
const helper = "helper"

// Fleet is GitLab Runner's Kubernetes executor: its pod exists for its
// job, which the manager ends (no idle signal).
type Fleet struct{ fleet.Quiet }

var _ fleet.Fleet = Fleet{}

// Name is the preset's name.
func (Fleet) Name() runnerpod.PresetName { return Name }

// Defaults: the container "build", the job read from the executor's
// marks, capped at 744h (31 days): a project's job timeout must be under
// one month (Project::MAX_BUILD_TIMEOUT = 1.month, app/models/project.rb),
// and the build pod starts with its job.
func (Fleet) Defaults() runnerpod.Preset {
	return runnerpod.Preset{RunnerContainers: []string{"build"}, MaxProtected: metav1.Duration{Duration: 744 * time.Hour},
		Job: runnerpod.JobKeys{
			ID: runnerpod.PodKey{Annotation: JobIDAnnotation}, Project: runnerpod.PodKey{Label: ProjectIDLabel},
			Name: runnerpod.PodKey{Annotation: JobNameAnnotation}, URL: runnerpod.PodKey{Annotation: JobURLAnnotation},
		}}
}

// Fits: the executor's helper container.
func (Fleet) Fits(pod *corev1.Pod) bool { return runnerpod.HasContainer(pod, helper) }

// JobStart is the pod's start: it exists for one job.
func (Fleet) JobStart(pod *corev1.Pod) *metav1.Time { return fleet.PodStart(pod) }

// Sample adds the helper container.
func (Fleet) Sample(pod *corev1.Pod) {
	if !runnerpod.HasContainer(pod, helper) {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: helper})
	}
}

// Traits: the manager that created the pod ends its job; a death is told
// as a commit status.
func (Fleet) Traits() fleet.Traits {
	return fleet.Traits{
		Owner:  fleet.Owner{EndsJob: true, InRunnerNamespace: true},
		ToldOn: fleet.GitLabCommitStatus,
		Chart:  fleet.Chart{Fits: `%[1]s.spec.containers.exists(c, c.name == "helper")`, JobMarks: true},
		Zombies: map[string]string{
			runnerpod.JobOverZombie: "GitLab says its job finished, yet its build pod still runs: GitLab Runner deletes a job's pod when the job ends, so its manager no longer follows this one (delete the pod to free its node)",
		},
	}
}
