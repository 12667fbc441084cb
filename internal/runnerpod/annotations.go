package runnerpod

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// Keys runnerguard reads or writes on pods and namespaces. One prefix,
// runnerguard.io/, for everything of ours.
const (
	// AllowDelete is the override a deliberate drain sets before deleting or
	// evicting a busy runner pod. Its value is the reason, which is required
	// (an empty value does not override) and is logged with the requester.
	AllowDelete = "runnerguard.io/allow-delete"

	// Inject set to "false" on a pod skips all instrumentation. Any other
	// value, or none, lets the injector work. Parsed with strconv.ParseBool.
	Inject = "runnerguard.io/inject"

	// CreatedBy is written by the injector at CREATE with the requester's
	// username, always overwriting what the pod came with, so that a DELETE
	// by the same principal can be recognised as the job's owner ending its
	// job (presets whose owner ends the job by deleting the pod).
	CreatedBy = "runnerguard.io/created-by"

	// CreatedWith is written by the injector beside CreatedBy with the
	// credential the CREATE was made with (the API server's
	// authentication.kubernetes.io/credential-id: a token's JTI), always
	// overwriting what the pod came with, and removed when the request
	// carried none. A ServiceAccount of the pod's own namespace whose token
	// is bound to no pod (a manager outside the cluster, a long-lived token)
	// is taken as the job's owner only with this same credential: `edit`
	// there can impersonate it or mint a new token for it, never present
	// this one. It names the credential, it is not one.
	CreatedWith = "runnerguard.io/created-with"

	// CreatedFrom is written beside CreatedBy with the pod the CREATE's
	// token was bound to (the API server's authentication.kubernetes.io/
	// pod-name), "" when it was bound to none (a manager outside the
	// cluster, one long-lived token). A manager created with no pod is
	// never taken as the job's owner by a token bound to a pod: `edit`
	// in its namespace could run a pod as its ServiceAccount and mint a
	// token bound to that pod, and such a manager never uses one.
	CreatedFrom = "runnerguard.io/created-from"

	// JobAssignedAt is written by the leader (recorder.EphemeralRunners) on
	// an ARC scale-set runner pod when it sees the pod's EphemeralRunner
	// turn busy (its status names a job): the job's start, apart from the
	// runner's. The chart's policy lets only runnerguard change it.
	JobAssignedAt = "runnerguard.io/job-assigned-at"

	// PresetAnnotation is written by the injector with the name of the preset that
	// matched, for operators and for the death record.
	PresetAnnotation = "runnerguard.io/preset"

	// EnabledNamespaceLabel opts a namespace in: runnerguard.io/enabled=true.
	EnabledNamespaceLabel = "runnerguard.io/enabled"

	// ModeLabel on a namespace sets the guard's mode there: enforce or
	// warn, over the chart's guard.mode; effective at once.
	ModeLabel = "runnerguard.io/mode"

	// RunnerLabel marks a runner pod for the pod watcher, whose cache holds
	// only pods that carry it: the injector sets it at CREATE, and the
	// watcher's leader sets it on runner pods created without it (while the
	// injector was down, or before runnerguard was installed).
	RunnerLabel = "runnerguard.io/runner"

	// DrainDeadline on a Node is the time (RFC3339) from which the guard lets
	// a busy runner on that node be evicted or deleted: a platform that
	// drains nodes by itself (a managed node pool's upgrade) gets the same
	// end as `kubectl runnerguard drain --deadline`. No value, or one that
	// does not parse, frees nothing.
	DrainDeadline = "runnerguard.io/drain-deadline"

	// DrainDeadlineBy on a Node names who set DrainDeadline: the chart's
	// admission policy requires it equal to the requester's username
	// whenever DrainDeadline is added or changed, so the death records of
	// the runners it frees name that person or controller.
	DrainDeadlineBy = "runnerguard.io/drain-deadline-by"
)

// The autoscalers' marks the leader's marker sets on a runner pod while the
// guard protects it, so that no node is consolidated under a live job and
// none is held for an idle runner.
const (
	KarpenterDoNotDisrupt      = "karpenter.sh/do-not-disrupt"
	ClusterAutoscalerSafeEvict = "cluster-autoscaler.kubernetes.io/safe-to-evict"
	// ClusterAutoscalerLocalVolumes names, comma-separated, the pod's local
	// volumes cluster-autoscaler may drop with it: the injector's.
	ClusterAutoscalerLocalVolumes = "cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes"
	// Marked lists, comma-separated, the marks runnerguard set on the pod:
	// a mark present without it is the pod author's, which the marker
	// never changes.
	Marked = "runnerguard.io/marked"
)

// VitalsContainer is the name of the vitals native sidecar the injector
// adds; its termination message holds the final memory reading.
const VitalsContainer = "runnerguard-vitals"

// The volumes the injector adds with the sidecar: the node's cgroup
// filesystem (a hostPath) and the emptyDir the sidecar writes to. The
// marker names them to cluster-autoscaler as safe to lose.
const (
	CgroupVolume = "runnerguard-cgroup"
	VitalsVolume = "runnerguard-vitals"
)

// BudgetLabel selects a busy runner's pod for its namespace's
// PodDisruptionBudget (value held; an earlier release wrote the pod's UID):
// written only by the marker (the chart's admission policy refuses anyone
// else), so only runnerguard decides which pods the budget holds.
const BudgetLabel = "runnerguard.io/budget"

// Labelled selects the pods that carry RunnerLabel: the runner pods the
// guard's and the recorder's caches hold, so that their memory grows with
// the fleet, not with the cluster.
func Labelled() labels.Selector {
	r, _ := labels.NewRequirement(RunnerLabel, selection.Exists, nil) // a valid key
	return labels.NewSelector().Add(*r)
}

// Meta is an empty pod's metadata, the form of every metadata-only read and
// patch of a runner pod and of the replicas' metadata informer of them.
func Meta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
	return m
}
