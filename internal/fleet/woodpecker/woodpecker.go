// Package woodpecker is Woodpecker CI's Kubernetes backend as a fleet: one
// pod per step (go.woodpecker-ci.org/woodpecker/v3,
// pipeline/backend/kubernetes/pod.go), named "wp-<step's ULID>", whose one
// container has the pod's name; a service's pod is "wp-svc-<ULID>-<name>".
// The agent creates each step's pod and deletes it when the step ends, and
// deletes the workflow's pods when it is cancelled or times out.
package woodpecker

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Name is the preset's name.
const Name runnerpod.PresetName = "woodpecker"

// The backend's labels on a step's pod (pod.go podLabels; pipeline/const.go):
// the step's name, the workflow's id (TaskUUIDLabel holds the workflow's
// number, not a UUID), the repository as "owner-name", and, from the
// workflow's labels the server stamps after dropping any a pipeline set
// under woodpecker-ci.org/ (pipeline/frontend/builder/builder.go), the
// forge's type (ForgeLabel, named forge-id, holds the type: github,
// gitlab, gitea, forgejo, bitbucket...) and the forge's own id of the
// repository.
const (
	StepLabel         = "woodpecker-ci.org/step"
	TaskUUIDLabel     = "woodpecker-ci.org/task-uuid"
	RepoFullNameLabel = "woodpecker-ci.org/repo-full-name"
	ForgeLabel        = "woodpecker-ci.org/forge-id"
	RepoForgeIDLabel  = "woodpecker-ci.org/repo-forge-id"
)

// The step's environment the job is read from (pipeline/frontend/metadata
// environment.go): the repository as owner/name, the commit, the step's
// page. A step's own environment can set these too (the compiler copies it
// over the metadata's), so they are the pipeline's word within its
// repository, which the labels above name.
const (
	RepoEnv    = "CI_REPO"
	CommitEnv  = "CI_COMMIT_SHA"
	StepURLEnv = "CI_STEP_URL"
)

// PodPrefix begins every step's pod and container name (pod.go podPrefix).
const PodPrefix = "wp-"

// Fleet is Woodpecker's step pods: a pod exists for its step, which the
// agent ends (no idle signal).
type Fleet struct{ fleet.Quiet }

var _ fleet.Fleet = Fleet{}

// mark tells the fleet's pods from others.
const mark = fleet.OwnLabel(StepLabel)

// Name is the preset's name.
func (Fleet) Name() runnerpod.PresetName { return Name }

// Defaults: the step's container, the job read from the backend's labels
// and the step's environment (copied by the injector at CREATE), capped
// at 24h: the server kills a pipeline at its repository's timeout,
// at most max-pipeline-timeout (120 minutes unless the instance raised
// it; cmd/server/flags.go), and a step's pod carries no deadline of its
// own.
func (Fleet) Defaults() runnerpod.Preset {
	return runnerpod.Preset{RunnerContainers: []string{PodPrefix + runnerpod.AnyRest}, MaxProtected: metav1.Duration{Duration: 24 * time.Hour},
		Job: runnerpod.JobKeys{
			ID: runnerpod.PodKey{Label: TaskUUIDLabel}, Name: runnerpod.PodKey{Label: StepLabel},
			Project: runnerpod.PodKey{Env: RepoEnv}, URL: runnerpod.PodKey{Env: StepURLEnv},
			Commit: runnerpod.PodKey{Env: CommitEnv}, Forge: runnerpod.PodKey{Label: ForgeLabel},
			RepositoryID: runnerpod.PodKey{Label: RepoForgeIDLabel},
		}}
}

// Fits: the step label, which the backend sets on every pod it makes
// after any label a step or the instance asked for.
func (Fleet) Fits(pod *corev1.Pod) bool { return mark.On(pod) }

// JobStart is the pod's start: it exists for one step.
func (Fleet) JobStart(pod *corev1.Pod) *metav1.Time { return fleet.PodStart(pod) }

// Sample gives the pod the step label.
func (Fleet) Sample(pod *corev1.Pod) { mark.Put(pod, "runnerguard-check") }

// Traits: the agent that created the pod ends its step, and may run in the
// steps' namespace (the backend's default namespace is the agent's); the
// marks that name the step are the agent's word, kept as created; a death
// is told on the step's commit on its forge.
func (Fleet) Traits() fleet.Traits {
	return fleet.Traits{
		MarkLabels: []string{string(mark)},
		Owner:      fleet.Owner{EndsJob: true, InRunnerNamespace: true},
		ToldOn:     fleet.ForgeCommit,
		Chart:      mark.Chart(),
	}
}
