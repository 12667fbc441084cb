package config

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

// Config configures both webhooks.
type Config struct {
	// Presets are the fleets whose pods are runner pods, in match order.
	Presets []runnerpod.Preset `json:"presets"`
	Guard   Guard              `json:"guard"`
	Inject  Inject             `json:"inject"`
	Policy  Policy             `json:"policy"`
}

// Policy configures the ValidatingAdmissionPolicy that says who may write
// the signals the guard trusts. The server does not read it; the chart and
// webhook/registration build the policy from it.
type Policy struct {
	// GarbageCollectors are the usernames of the garbage collector, which
	// removes a deleted owner from its dependents' ownerReferences: with a
	// fleet's controllers, the only principals that may change a runner
	// pod's ownerReferences, preset labels and idle signal.
	GarbageCollectors []string `json:"garbageCollectors"`
}

// Guard configures the validating webhook.
type Guard struct {
	// ExemptPrincipals are usernames whose deletes and evictions are always
	// allowed (rule 8): cluster machinery that must never be blocked.
	ExemptPrincipals []string `json:"exemptPrincipals"`
	// OwnerPrincipals are usernames that own the jobs of presets whose owner
	// ends a job by deleting its pod (rule 7), for pods created while the
	// injector was down and so carry no created-by annotation.
	OwnerPrincipals []string `json:"ownerPrincipals,omitempty"`
}

// Inject configures the mutating webhook.
type Inject struct {
	// TerminationMessagePolicy makes runner containers that kept the default
	// policy use FallbackToLogsOnError, so their last log lines survive.
	TerminationMessagePolicy bool `json:"terminationMessagePolicy"`
	// PodAnnotations are added to runner pods where absent, by default the
	// autoscalers' do-not-disrupt marks.
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	Vitals         Vitals            `json:"vitals"`
}

// Vitals configures the vitals sidecar the injector adds.
type Vitals struct {
	Enabled         bool                        `json:"enabled"`
	Image           string                      `json:"image"`
	ImagePullPolicy corev1.PullPolicy           `json:"imagePullPolicy,omitempty"`
	Interval        metav1.Duration             `json:"interval"`
	Resources       corev1.ResourceRequirements `json:"resources"`
	// CgroupHostPath is the node's cgroup filesystem, mounted read-only.
	CgroupHostPath string `json:"cgroupHostPath"`
	// MountPath is where the runner containers find the vitals files
	// (memory.events, memory.peak, vitals.json), read-only.
	MountPath string `json:"mountPath"`
}

// Default exempt principals. Taint-based eviction runs with the
// node-controller's credentials (kube-controller-manager core.go,
// newTaintEvictionController), not a taint-eviction-controller account.
var (
	NamespaceController = "system:serviceaccount:kube-system:namespace-controller"
	PodGC               = "system:serviceaccount:kube-system:pod-garbage-collector"
	TaintEviction       = "system:serviceaccount:kube-system:node-controller"
	// GarbageCollector is kube-controller-manager's garbage collector with
	// --use-service-account-credentials (without it, every controller is
	// system:kube-controller-manager).
	GarbageCollector = "system:serviceaccount:kube-system:generic-garbage-collector"
)

// Default returns the configuration used when no file is given.
func Default() Config {
	return Config{
		Presets: runnerpod.DefaultPresets(),
		Guard: Guard{
			ExemptPrincipals: []string{NamespaceController, PodGC, TaintEviction},
		},
		Policy: Policy{GarbageCollectors: []string{GarbageCollector}},
		Inject: Inject{
			TerminationMessagePolicy: true,
			PodAnnotations: map[string]string{
				runnerpod.KarpenterDoNotDisrupt:      "true",
				runnerpod.ClusterAutoscalerSafeEvict: "false",
			},
			Vitals: Vitals{
				Enabled:         true,
				Image:           "ghcr.io/runnerguard/runnerguard:latest",
				ImagePullPolicy: corev1.PullIfNotPresent,
				Interval:        metav1.Duration{Duration: 5 * time.Second},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("5m"),
						corev1.ResourceMemory: resource.MustParse("16Mi"),
					},
					Limits: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("50m"),
						corev1.ResourceMemory: resource.MustParse("32Mi"),
					},
				},
				CgroupHostPath: "/sys/fs/cgroup",
				MountPath:      "/runnerguard/vitals",
			},
		},
	}
}

// RunnerContainerNames is every container name of the enabled presets: the
// names the DELETE webhook's matchConditions look for.
func (c Config) RunnerContainerNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, p := range c.Presets {
		if !p.Enabled {
			continue
		}
		for _, n := range p.RunnerContainers {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names
}
