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
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.record.pod`
// +kubebuilder:printcolumn:name="Class",type=string,JSONPath=`.record.class`
// +kubebuilder:printcolumn:name="Exit",type=integer,JSONPath=`.record.exitCode`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.record.reason`
// +kubebuilder:printcolumn:name="Deleted By",type=string,JSONPath=`.record.deletedBy`
// +kubebuilder:printcolumn:name="Job",type=string,JSONPath=`.record.job.id`
// +kubebuilder:printcolumn:name="Project",type=string,JSONPath=`.record.job.project`,priority=1
// +kubebuilder:printcolumn:name="Disruption",type=string,JSONPath=`.record.disruption.reason`,priority=1
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.record.node`,priority=1
// +kubebuilder:printcolumn:name="Preset",type=string,JSONPath=`.record.preset`,priority=1
// +kubebuilder:printcolumn:name="Reports",type=string,JSONPath=`.status.reports[*].phase`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RunnerDeath struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Record is the death: a fact, so it cannot change once written.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a death record is immutable"
	Record DeathRecord `json:"record"`

	// Status says whether and where the death was told to the CI service
	// and the sinks (the leader's reporter writes the reports), and the CI
	// system's own account of the job (the leader writes it once).
	// +optional
	Status RunnerDeathStatus `json:"status,omitempty"`
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
	// PodMessage is the pod's status message that goes with PodReason (the
	// kubelet's eviction message names the resource and the usage).
	// +optional
	PodMessage string `json:"podMessage,omitempty"`
	// Class is the kind of death; see the contract's table of classes.
	Class string `json:"class"`
	// ClassBasis says what the class rests on when it is not the runner's
	// own terminated state alone: an inference (a probe kill), the node's
	// state, or the evidence that overrode the exit code.
	// +optional
	ClassBasis string `json:"classBasis,omitempty"`
	// Message is the runner container's termination message: with the
	// injected FallbackToLogsOnError policy, its last log lines when it
	// failed. The container writes it (so does the job running in it): it
	// is the runner's own word, never evidence for the class. At most
	// MaxMessageBytes, its tail when longer.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
	// MessageTruncated: the message was longer than MaxMessageBytes and
	// only its end is kept.
	// +optional
	MessageTruncated bool `json:"messageTruncated,omitempty"`
	// Job is the CI job the runner ran, as its fleet stated it when the
	// death was recorded.
	// +optional
	Job *Job `json:"job,omitempty"`
	// Disruption is the pod's DisruptionTarget condition: the control
	// plane's or the kubelet's note of why it took the pod down.
	// +optional
	Disruption *Disruption `json:"disruption,omitempty"`
	// LivenessProbe: the runner container had a liveness probe, so the
	// kubelet could kill it for failing one.
	// +optional
	LivenessProbe bool `json:"livenessProbe,omitempty"`
	// NodeState is the node's state when the death was recorded.
	// +optional
	NodeState *NodeState `json:"nodeState,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// JobStartedAt is when the runner's job began, where the cluster can
	// tell it apart from the runner's start: for ARC scale sets, when the
	// leader saw the EphemeralRunner turn busy (the pod's
	// runnerguard.io/job-assigned-at, which only runnerguard writes); for
	// GitLab, the build pod's start (it exists for one job).
	// +optional
	JobStartedAt *metav1.Time `json:"jobStartedAt,omitempty"`
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
	// DeletedAt is when the deletion that ended the runner was asked for
	// (the guard's note, else a grace period before the deletionTimestamp).
	// +optional
	DeletedAt *metav1.Time `json:"deletedAt,omitempty"`
	// StartedBy is who started the deletion DeletedBy carried out for them:
	// the requester of the deletion of the pod's EphemeralRunner, which ARC
	// completes by deleting the pod.
	// +optional
	StartedBy string `json:"startedBy,omitempty"`
	// EvictionRequest is the eviction request the runner's pod went on,
	// where the API server has them (lifecycle.k8s.io, Kubernetes 1.38 with
	// the EvictionRequestAPI gate) and runnerguard answered it as the pod's
	// responder: DeletedBy is then the evictor that carried it out.
	// +optional
	EvictionRequest *EvictionRequestRef `json:"evictionRequest,omitempty"`
	// DeleteReason is the reason the override gave, when the override let
	// the delete through (rule override), as the guard noted it.
	// +optional
	DeleteReason string `json:"deleteReason,omitempty"`
	// Refusals are the deletes, evictions, execs and attaches the guard
	// refused while the runner ran, as they stood on its pod.
	// +optional
	Refusals *Refusals `json:"refusals,omitempty"`
	// Vitals is the vitals sidecar's final reading, when it left one.
	// +optional
	Vitals *Vitals `json:"vitals,omitempty"`
	// OOMConfirmed says what the vitals say of an OOM-shaped death: true
	// when they counted an oom_kill, false when they counted none on cgroup
	// v2; absent without vitals, for other classes, and for no count on v1,
	// where a kill can go uncounted.
	// +optional
	OOMConfirmed *bool `json:"oomConfirmed,omitempty"`
	// Stall is the stall at the memory limit the vitals sidecar saw
	// lasting until the runner ended; the class stays what ended the
	// runner (its timeout, its cancel, its deletion).
	// +optional
	Stall *Stall `json:"stall,omitempty"`
	// Zombie is what the leader named the runner while it lived: alive,
	// but its fleet's objects showed it would never run a job
	// (runnerguard.io/zombie); absent for a runner never named one.
	// +optional
	Zombie *Zombie `json:"zombie,omitempty"`
}

// Zombie is a runner named a zombie: the kind of evidence, its fleet's
// word for it, and since when.
type Zombie struct {
	Kind  string      `json:"kind"`
	Since metav1.Time `json:"since"`
}

// RunnerDeathList is a list of RunnerDeaths.
//
// +kubebuilder:object:root=true
type RunnerDeathList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RunnerDeath `json:"items"`
}
