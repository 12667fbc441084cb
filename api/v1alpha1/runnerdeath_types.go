package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunnerDeath is one runner's death, written once by runnerguard's pod
// watcher in the runner's namespace and never changed. Its name is a
// function of the pod UID and the container's run, so the API server's
// AlreadyExists keeps each death on record exactly once for as long as the
// object lives; retention, set in the chart, removes it.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="helm.sh/resource-policy=keep"
// +kubebuilder:resource:scope=Namespaced,shortName=rdeath,categories=runnerguard
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.record.pod`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.record.class`
// +kubebuilder:printcolumn:name="Exit",type=integer,JSONPath=`.record.exitCode`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.record.reason`
// +kubebuilder:printcolumn:name="Deleted By",type=string,JSONPath=`.record.deletedBy`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.record.node`,priority=1
// +kubebuilder:printcolumn:name="Preset",type=string,JSONPath=`.record.preset`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RunnerDeath struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Record is the death: a fact, so it cannot change once written.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a death record is immutable"
	Record DeathRecord `json:"record"`
}

// DeathRecord is what is known of one runner's death.
type DeathRecord struct {
	Pod string `json:"pod"`
	UID string `json:"uid"`
	// +optional
	Node   string `json:"node,omitempty"`
	Preset string `json:"preset"`
	// Container is the runner container that died.
	Container string `json:"container"`
	// +optional
	ContainerID string `json:"containerID,omitempty"`
	// ExitCode is absent when the runner had not ended when its pod was
	// removed (class deleted-running).
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// +optional
	Signal int32 `json:"signal,omitempty"`
	// Reason is the container's terminated reason (Error, OOMKilled, ...).
	// +optional
	Reason string `json:"reason,omitempty"`
	// PodReason is the pod's status reason when it explains the death
	// (Evicted, DeadlineExceeded, NodeLost).
	// +optional
	PodReason string `json:"podReason,omitempty"`
	// Class is the kind of death; see the contract's table of classes.
	Class string `json:"class"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// Restarts is the container's restart count before this death.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`
	// Deleted: the runner ended because its pod was being deleted.
	// +optional
	Deleted bool `json:"deleted,omitempty"`
	// DeletedBy is who asked for the deletion, as the guard noted it; empty
	// when the delete was not reviewed (an exempt principal, or the guard
	// was down).
	// +optional
	DeletedBy string `json:"deletedBy,omitempty"`
	// DeleteRule is the guard's rule that let the delete through
	// (job-owner, override, idle, ...).
	// +optional
	DeleteRule string `json:"deleteRule,omitempty"`
	// StartedBy is who started the deletion DeletedBy carried out for them:
	// the requester of the deletion of the pod's EphemeralRunner, which ARC
	// completes by deleting the pod.
	// +optional
	StartedBy string `json:"startedBy,omitempty"`
	// Vitals is the vitals sidecar's final reading, when it left one.
	// +optional
	Vitals *Vitals `json:"vitals,omitempty"`
	// OOMConfirmed says what the vitals say of an OOM-shaped death: true
	// when they counted an oom_kill, false when they counted none on cgroup
	// v2; absent without vitals, for other classes, and for no count on v1,
	// where a kill can go uncounted.
	// +optional
	OOMConfirmed *bool `json:"oomConfirmed,omitempty"`
}

// Vitals is the pod-level memory reading the sidecar left as it stopped.
type Vitals struct {
	// Cgroup is v1 or v2.
	Cgroup string `json:"cgroup"`
	// +optional
	Peak *int64 `json:"peak,omitempty"`
	// PeakObserved: the kernel has no memory.peak; Peak is the highest
	// current the sidecar saw.
	// +optional
	PeakObserved bool `json:"peakObserved,omitempty"`
	// +optional
	Limit   *int64 `json:"limit,omitempty"`
	OOM     int64  `json:"oom"`
	OOMKill int64  `json:"oomKill"`
}

// RunnerDeathList is a list of RunnerDeaths.
//
// +kubebuilder:object:root=true
type RunnerDeathList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RunnerDeath `json:"items"`
}
