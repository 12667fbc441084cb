package runnerpod

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PresetName names a fleet whose runner pods runnerguard knows
// (internal/presets lists them). The name fixes how the pod is recognised,
// how a busy runner is told from an idle one and whether the job's owner
// ends the job by deleting the pod: those are facts of the fleet's own
// code (internal/fleet), not settings. Container names and the diagnostic
// environment are settings.
type PresetName string

// Preset is one fleet's configuration.
type Preset struct {
	Name PresetName `json:"name"`
	// Enabled presets are matched; a disabled one is skipped.
	Enabled bool `json:"enabled"`
	// RunnerContainers are the names of the containers that run the runner
	// (or, for job pods, the job); a name ending in "*" names every
	// container that begins with the rest (IsRunnerContainer).
	RunnerContainers []string `json:"runnerContainers"`
	// DiagnosticEnv is added to the runner containers where the pod author
	// has not set the same name.
	DiagnosticEnv []corev1.EnvVar `json:"diagnosticEnv,omitempty"`
	// ControllerPrincipals are the usernames of the fleet's own controllers:
	// with the garbage collector, the only principals that may change the
	// fleet's idle signal and the fields that decide a pod's preset and
	// owner on an existing pod (enforced by the ValidatingAdmissionPolicy).
	ControllerPrincipals []string `json:"controllerPrincipals,omitempty"`
	// OwnerPrincipals own the jobs of a preset whose owner ends the job
	// (OwnerEndsJob), for its pods created while the injector was down.
	OwnerPrincipals []string `json:"ownerPrincipals,omitempty"`
	// OwnerInRunnerNamespace (for a fleet whose owner may run there:
	// GitLab) takes as the job's owner a ServiceAccount of the build pod's
	// own namespace (the recorded creator or an owner principal), which anyone granted edit in that namespace
	// can impersonate: they could then end any job there. Off, the guard
	// refuses such an owner's delete of a busy pod; run the manager in a
	// namespace of its own instead.
	OwnerInRunnerNamespace bool `json:"ownerInRunnerNamespace,omitempty"`
	// MaxProtected caps how long a running runner is protected; a file
	// that leaves it out gets the fleet's default.
	MaxProtected metav1.Duration `json:"maxProtected,omitempty"`
	// Job names the pod labels and annotations that state the job; a file
	// that leaves it out gets the fleet's default.
	Job JobKeys `json:"job,omitempty"`
}

// Runner is a matched runner pod: its preset and its runner containers.
type Runner struct {
	Preset Preset
	// Containers are the pod's runner containers, in the pod's order.
	Containers []string
}

// NamesOwner reports whether the preset takes requester by name as the
// job's owner of pod: the pod's recorded creator (CreatedBy) or one of the
// preset's OwnerPrincipals. The guard proves a ServiceAccount of the pod's
// own namespace further; the record believes a job-owner note only so.
func (p Preset) NamesOwner(pod *corev1.Pod, requester string) bool {
	return pod.Annotations[CreatedBy] == requester || slices.Contains(p.OwnerPrincipals, requester)
}

// AnyRest ends a RunnerContainers entry that names every container whose
// name begins with the rest: a fleet whose job containers are named by the
// job's author under a prefix of the fleet's own (Tekton's "step-*").
const AnyRest = "*"

// IsRunnerContainer reports whether a container named name is one of
// patterns: a name, or a prefix followed by AnyRest.
func IsRunnerContainer(patterns []string, name string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool {
		if prefix, ok := strings.CutSuffix(p, AnyRest); ok {
			return strings.HasPrefix(name, prefix)
		}
		return p == name
	})
}

// HasContainer reports whether the pod has a (main) container of that name.
func HasContainer(pod *corev1.Pod, name string) bool {
	return slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
}
