package config

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Config configures both webhooks.
type Config struct {
	// Presets are the fleets whose pods are runner pods, in match order.
	Presets []runnerpod.Preset `json:"presets"`
	Guard   Guard              `json:"guard"`
	Inject  Inject             `json:"inject"`
	Records Records            `json:"records"`
	Policy  Policy             `json:"policy"`
	Marks   Marks              `json:"marks"`
	Reports Reports            `json:"reports,omitempty"`
}

// Marks says which autoscalers' do-not-disrupt marks the leader keeps on
// runner pods while the guard protects them (and removes once it does not).
// One turned off is not set, and those the leader set are removed.
type Marks struct {
	// Karpenter: karpenter.sh/do-not-disrupt: "true" while busy.
	Karpenter bool `json:"karpenter"`
	// KarpenterDuration writes that mark as the protection's length from
	// the pod's start instead of "true" (Karpenter v1.12 and later read
	// it so; older ones take it for no mark), so the node is released at
	// the cap even if runnerguard is gone.
	KarpenterDuration bool `json:"karpenterDuration"`
	// ClusterAutoscaler: cluster-autoscaler.kubernetes.io/safe-to-evict:
	// "false" while busy, "true" while idle or done, and the injected
	// volumes in safe-to-evict-local-volumes.
	ClusterAutoscaler bool `json:"clusterAutoscaler"`
	// Budgets: each busy runner pod of an enforce namespace held by the
	// namespace's PodDisruptionBudget (recorder.Budget), so the API server
	// holds its eviction without the webhook.
	Budgets bool `json:"budgets"`
}

// Policy configures the ValidatingAdmissionPolicy that says who may write
// the signals the guard trusts. The server does not read it; the chart
// builds the policy from the same values.
type Policy struct {
	// GarbageCollectors are the usernames of the garbage collector, which
	// removes a deleted owner from its dependents' ownerReferences: with a
	// fleet's controllers, the only principals that may change a runner
	// pod's ownerReferences, preset labels and idle signal.
	GarbageCollectors []string `json:"garbageCollectors"`
}

// Records configures how long the RunnerDeath records are kept; the pod
// watcher's leader collects them.
type Records struct {
	// MaxAge: records of deaths an operator must look at are removed this
	// long after they were written.
	MaxAge metav1.Duration `json:"maxAge"`
	// CleanMaxAge: records of clean exits and jobs ended by their owner are
	// removed this long after they were written; 0: they are not written.
	CleanMaxAge metav1.Duration `json:"cleanMaxAge"`
	// MaxPerNamespace keeps at most this many records in a namespace, the
	// oldest normal ones (clean exits, jobs' normal ends) removed first, the
	// oldest abnormal ones only when no normal one is left, but not those
	// of pods that still exist; 0: no limit.
	MaxPerNamespace int `json:"maxPerNamespace"`
	// CollectInterval is how often the collector runs.
	CollectInterval metav1.Duration `json:"collectInterval"`
}

// Mode is what the guard does with a busy runner's delete or eviction.
type Mode string

// The guard's modes.
const (
	// ModeEnforce refuses it (403 for a delete, 429 for an eviction).
	ModeEnforce Mode = "enforce"
	// ModeWarn allows it, with the refusal's text as an admission warning,
	// a Warning Event and decision="warn" in the decisions metric: what a
	// platform team runs first, to see what enforce would refuse.
	ModeWarn Mode = "warn"
)

// Guard configures the validating webhook.
type Guard struct {
	// Mode applies where a namespace's runnerguard.io/mode label does not
	// say otherwise, and only where the API server did not say which mode
	// it called for (a registration other than the chart's, which names
	// the mode in the path it calls: see ModeFromPath).
	Mode Mode `json:"mode"`
	// ExemptPrincipals are usernames whose deletes and evictions are always
	// allowed (rule 8): cluster machinery that must never be blocked.
	ExemptPrincipals []string `json:"exemptPrincipals"`
	// ZombieReapers are usernames whose deletes of a zombie runner pod
	// (runnerpod.ZombieAnnotation) are allowed, beside the fleet's own
	// controllers (rule zombie); a zombie's eviction passes for anyone.
	ZombieReapers []string `json:"zombieReapers,omitempty"`
	// EndZombiesAfter, when set, has the leader end a zombie itself once
	// it has been one this long (counted from its since), the way its
	// fleet ends one (fleet.Traits.ZombieEndedByRecord); zero never does.
	EndZombiesAfter metav1.Duration `json:"endZombiesAfter,omitempty"`
	// Owner principals are per preset (presets[].ownerPrincipals): one
	// global list made the GitLab manager an owner of ARC's workflow pods.
}

// Inject configures the mutating webhook.
type Inject struct {
	// TerminationMessagePolicy makes runner containers that kept the default
	// policy use FallbackToLogsOnError, so their last log lines survive.
	TerminationMessagePolicy bool `json:"terminationMessagePolicy"`
	// PodAnnotations are added to runner pods where absent (none by
	// default: the autoscalers' marks follow the runner's busy state, see
	// Marks).
	PodAnnotations map[string]string `json:"podAnnotations,omitempty"`
	// PodSecurityDefault is the Pod Security level the API server enforces
	// on a namespace without a pod-security.kubernetes.io/enforce label (its
	// AdmissionConfiguration's defaults.enforce, which a webhook cannot
	// read): privileged, baseline or restricted. Empty means privileged,
	// the API server's own default.
	PodSecurityDefault string `json:"podSecurityDefault,omitempty"`
	Vitals             Vitals `json:"vitals"`
}

// The Pod Security levels (k8s.io/pod-security-admission/api; three strings
// are not worth the module).
const (
	PodSecurityPrivileged = "privileged"
	PodSecurityBaseline   = "baseline"
	PodSecurityRestricted = "restricted"
)

// Vitals configures the vitals sidecar the injector adds.
type Vitals struct {
	Enabled         bool                        `json:"enabled"`
	Image           string                      `json:"image"`
	ImagePullPolicy corev1.PullPolicy           `json:"imagePullPolicy,omitempty"`
	Interval        metav1.Duration             `json:"interval"`
	Resources       corev1.ResourceRequirements `json:"resources"`
	// CgroupHostPath is the node's cgroup filesystem, mounted read-only
	// (writable with OOMNotify).
	CgroupHostPath string `json:"cgroupHostPath"`
	// MountPath is where the runner containers find the vitals files
	// (memory.events, memory.peak, vitals.json), read-only.
	MountPath string `json:"mountPath"`
	// ProbePort is the pod port the sidecar's readiness probe is served on:
	// not ready while the pod stalls at its memory limit, which the leader
	// turns into a Warning Event. 0: no probe (no live stall Event).
	ProbePort int32 `json:"probePort"`
	// OOMNotify lets the sidecar register the kernel's OOM notification on
	// cgroup v1, which counts every OOM kill where the poll can miss one:
	// the cgroup filesystem is mounted writable and the sidecar runs as
	// root (every capability still dropped). Off: it polls. No effect on v2.
	OOMNotify bool `json:"oomNotify,omitempty"`
}

// DefaultProbePort is the vitals sidecar's readiness probe port unless the
// chart sets another: a port of the pod's network namespace, so one a job
// is unlikely to listen on.
const DefaultProbePort = 9798

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

// Default returns the configuration used when no file is given: the
// chart's defaults. Every preset is listed but none is on (a fleet is
// chosen, like a namespace), and the guard warns.
func Default() Config {
	ps := presets.Defaults()
	for i := range ps {
		ps[i].Enabled = false
	}
	return Config{
		Presets: ps,
		Guard: Guard{
			Mode:             ModeWarn,
			ExemptPrincipals: []string{NamespaceController, PodGC, TaintEviction},
		},
		Policy: Policy{GarbageCollectors: []string{GarbageCollector}},
		Inject: Inject{
			TerminationMessagePolicy: true,
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
				ProbePort:      DefaultProbePort,
			},
		},
		Marks:   Marks{Karpenter: true, ClusterAutoscaler: true, Budgets: true},
		Reports: Reports{MaxAttempts: DefaultMaxAttempts, MaxAge: metav1.Duration{Duration: DefaultReportAge}},
		Records: Records{
			MaxAge:          metav1.Duration{Duration: 30 * 24 * time.Hour},
			CleanMaxAge:     metav1.Duration{Duration: 24 * time.Hour},
			MaxPerNamespace: 1000,
			CollectInterval: metav1.Duration{Duration: 10 * time.Minute},
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

// ModeFor is the guard's mode in a namespace with labels: its
// runnerguard.io/mode label when that names a mode, else def.
func ModeFor(labels map[string]string, def Mode) Mode {
	if m := Mode(labels[runnerpod.ModeLabel]); m == ModeEnforce || m == ModeWarn {
		return m
	}
	return def
}
