package runnerpod

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// PresetName names a fleet whose runner pods runnerguard knows. The name
// fixes how the pod is recognised, how a busy runner is told from an idle one
// and whether the job's owner ends the job by deleting the pod: those are
// facts of the fleet's own code, not settings. Container names and the
// diagnostic environment are settings.
type PresetName string

// The presets, one per known fleet.
const (
	// ARCScaleSet: GitHub ARC scale-set runner pods, owned by an
	// EphemeralRunner whose status carries the assigned job.
	ARCScaleSet PresetName = "arc-scale-set"
	// ARCWorkflow: the "<runner-pod>-workflow" job pod of ARC's container
	// mode "kubernetes"; the runner deletes it when the job ends.
	ARCWorkflow PresetName = "arc-workflow"
	// ARCLegacy: legacy (summerwind) ARC runner pods.
	ARCLegacy PresetName = "arc-legacy"
	// GitLab: GitLab Runner's Kubernetes executor build pod, one per job;
	// the runner manager deletes it when the job ends.
	GitLab PresetName = "gitlab"
	// Generic: a home-grown pool whose runner starts only with a job.
	Generic PresetName = "generic"
)

// Order is the order in which presets are tried, most specific first, so a
// pod that fits a fleet's own marks is never taken for a generic runner.
var Order = []PresetName{ARCWorkflow, GitLab, ARCScaleSet, ARCLegacy, Generic}

// Known reports whether n is one of the presets above.
func (n PresetName) Known() bool { return slices.Contains(Order, n) }

// OwnerEndsJob reports whether the fleet ends a job by deleting its pod, so
// a DELETE by the pod's creator is the job's owner at work.
func (n PresetName) OwnerEndsJob() bool { return n == ARCWorkflow || n == GitLab }

// Preset is one fleet's configuration.
type Preset struct {
	Name PresetName `json:"name"`
	// Enabled presets are matched; a disabled one is skipped.
	Enabled bool `json:"enabled"`
	// RunnerContainers are the names of the containers that run the runner
	// (or, for job pods, the job).
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
	// OwnerInRunnerNamespace (gitlab only) takes as the job's owner a
	// ServiceAccount of the build pod's own namespace (the recorded creator
	// or an owner principal), which anyone granted edit in that namespace
	// can impersonate: they could then end any job there. Off, the guard
	// refuses such an owner's delete of a busy pod; run the manager in a
	// namespace of its own instead.
	OwnerInRunnerNamespace bool `json:"ownerInRunnerNamespace,omitempty"`
	// MaxProtected caps how long a running runner is protected; a file
	// that leaves it out gets the preset's DefaultMaxProtected.
	MaxProtected metav1.Duration `json:"maxProtected,omitempty"`
	// Job names the pod labels and annotations that state the job; a file
	// that leaves it out gets the preset's DefaultJobKeys.
	Job JobKeys `json:"job,omitempty"`
}

// DefaultMaxProtected is the longest a job of the fleet's CI service can run,
// so the cap never ends a job the service itself would still let run:
//   - GitHub Actions: a job on a self-hosted runner runs for at most 5 days
//     ("Usage limits for self-hosted runners", docs.github.com). A workflow
//     pod starts with its job: 120h. A runner pod may wait for its job
//     first, and GitHub cancels a job queued for more than 24 h (up to
//     48 h): 168h.
//   - GitLab: a project's job timeout must be under one month
//     (Project::MAX_BUILD_TIMEOUT = 1.month, app/models/project.rb; "the
//     timeout must be between 10 minutes and 1 month" in the CI/CD settings
//     docs); the build pod starts with its job: 744h (31 days).
func (n PresetName) DefaultMaxProtected() time.Duration {
	switch n {
	case GitLab:
		return 744 * time.Hour
	case ARCWorkflow:
		return 120 * time.Hour
	}
	return 168 * time.Hour
}

// DefaultPresets returns every preset, enabled, in Order.
func DefaultPresets() []Preset {
	ps := []Preset{
		{Name: ARCWorkflow, Enabled: true, RunnerContainers: []string{"job"}},
		{Name: GitLab, Enabled: true, RunnerContainers: []string{"build"}},
		{Name: ARCScaleSet, Enabled: true, RunnerContainers: []string{"runner"}, DiagnosticEnv: githubRunnerEnv()},
		// No controller is trusted by default: a ServiceAccount named here
		// would be trusted to whoever may create its namespace on a
		// cluster without legacy ARC. Legacy ARC's users name their own.
		{Name: ARCLegacy, Enabled: true, RunnerContainers: []string{"runner"}, DiagnosticEnv: githubRunnerEnv()},
		{Name: Generic, Enabled: true, RunnerContainers: []string{"runner"}, DiagnosticEnv: githubRunnerEnv()},
	}
	for i := range ps {
		ps[i].MaxProtected.Duration = ps[i].Name.DefaultMaxProtected()
		ps[i].Job = ps[i].Name.DefaultJobKeys()
	}
	return ps
}

// ARCLegacyController is legacy ARC's controller as its documented install
// names it (release actions-runner-controller in namespace
// actions-runner-system): it writes the unregistration annotation. It is
// not trusted by default (see DefaultPresets); an operator who runs legacy
// ARC names it in the preset's ControllerPrincipals.
const ARCLegacyController = "system:serviceaccount:actions-runner-system:actions-runner-controller"

// githubRunnerEnv makes the GitHub runner copy its _diag log to stdout, so
// the log pipeline keeps it after the pod is gone.
func githubRunnerEnv() []corev1.EnvVar {
	return []corev1.EnvVar{{Name: "ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT", Value: "1"}}
}

// Runner is a matched runner pod: its preset and its runner containers.
type Runner struct {
	Preset Preset
	// Containers are the pod's runner containers, in the pod's order.
	Containers []string
}

// Match returns the first enabled preset, in the order given, that the pod
// fits, with the pod's runner containers. A pod with no container of a
// preset's RunnerContainers never fits it.
func Match(pod *corev1.Pod, presets []Preset) (Runner, bool) {
	for _, p := range presets {
		if !p.Enabled {
			continue
		}
		var names []string
		for _, c := range pod.Spec.Containers {
			if slices.Contains(p.RunnerContainers, c.Name) {
				names = append(names, c.Name)
			}
		}
		if len(names) > 0 && fits(pod, p.Name) {
			return Runner{Preset: p, Containers: names}, true
		}
	}
	return Runner{}, false
}

// PresetLabels and PresetAnnotations are the pod labels and annotations
// fits reads: a copy of a pod that keeps only these (the pod watcher's
// cache) is matched as the pod is.
var (
	PresetLabels      = []string{ARCWorkflowPodLabel, ARCScaleSetLabel, ARCLegacyRunnerSetLabel}
	PresetAnnotations = []string{ARCLegacyUnregistered}
)

// fits reports whether the pod carries the marks of the fleet.
func fits(pod *corev1.Pod, n PresetName) bool {
	switch n {
	case ARCWorkflow:
		_, ok := pod.Labels[ARCWorkflowPodLabel]
		return ok
	case GitLab:
		return hasContainer(pod, "helper")
	case ARCScaleSet:
		_, ok := pod.Labels[ARCScaleSetLabel]
		return ok || EphemeralRunnerOwner(pod) != ""
	case ARCLegacy:
		if _, ok := pod.Annotations[ARCLegacyUnregistered]; ok || hasContainer(pod, "docker") {
			return true
		}
		if _, ok := pod.Labels[ARCLegacyRunnerSetLabel]; ok {
			return true
		}
		for _, o := range pod.OwnerReferences {
			if gv, err := schema.ParseGroupVersion(o.APIVersion); err == nil && gv.Group == ARCLegacyGroup {
				return true
			}
		}
		return false
	case Generic:
		return true
	}
	return false
}

func hasContainer(pod *corev1.Pod, name string) bool {
	return slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
}

// EphemeralRunnerOwner returns the name of the EphemeralRunner that controls
// the pod, or "" when none does.
func EphemeralRunnerOwner(pod *corev1.Pod) string { return EphemeralRunnerRef(pod).Name }

// EphemeralRunnerRef returns the controller reference to the pod's
// EphemeralRunner, or a zero reference when none controls it.
func EphemeralRunnerRef(pod *corev1.Pod) metav1.OwnerReference {
	for _, o := range pod.OwnerReferences {
		if o.Controller == nil || !*o.Controller || o.Kind != EphemeralRunnerKind {
			continue
		}
		if gv, err := schema.ParseGroupVersion(o.APIVersion); err == nil && gv.Group == ARCScaleSetGroup {
			return o
		}
	}
	return metav1.OwnerReference{}
}
