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
	// and the sinks: the leader's reporter is its one writer.
	// +optional
	Status RunnerDeathStatus `json:"status,omitempty"`
}

// RunnerDeathStatus is the reporter's account of a death: one report per
// destination, kept on the record so that a new leader neither loses nor
// repeats one.
type RunnerDeathStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=destination
	Reports []Report `json:"reports,omitempty"`
}

// Report is one destination's telling of a death.
type Report struct {
	// Destination: github, gitlab, or sink/<name>.
	Destination string `json:"destination"`
	// Phase: Sending (an attempt began and its outcome is not known yet:
	// the next attempt first asks the service whether it arrived), Retrying
	// (an attempt failed and another follows), Sent, Failed (the attempts
	// ran out), Skipped (the record cannot be told there: Message says why).
	// +kubebuilder:validation:Enum=Sending;Retrying;Sent;Failed;Skipped
	Phase string `json:"phase"`
	// Attempts counts the attempts begun.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// Where is what was written: the check run's or the job's page, the
	// sink's URL.
	// +optional
	Where string `json:"where,omitempty"`
	// Message is the last failure, or why the report was skipped.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// +optional
	LastAttemptAt *metav1.Time `json:"lastAttemptAt,omitempty"`
	// NextAttemptAt is when a Retrying report is tried again: the backoff,
	// or later where the service asked to wait (Retry-After).
	// +optional
	NextAttemptAt *metav1.Time `json:"nextAttemptAt,omitempty"`
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
}

// Stall is a stall at the memory limit as the vitals sidecar judged it:
// the cgroup's tasks reclaiming in a loop without progress and without an
// OOM kill to end it. The sidecar's readings are the pod's own, so whoever
// can write the sidecar's termination message can write this too.
type Stall struct {
	// Began is the start of the first reading interval that held.
	Began metav1.Time `json:"began"`
	// Ended is the end of the last interval that held; absent when the
	// stall lasted to the sidecar's final reading.
	// +optional
	Ended *metav1.Time `json:"ended,omitempty"`
	// For is how long it lasted: to Ended, else to the runner's end.
	For metav1.Duration `json:"for"`
	// WorstPressure is the highest share of a reading's interval, in
	// percent, that every task of the cgroup waited on memory (cgroup v2
	// only).
	// +optional
	WorstPressure *int32 `json:"worstPressure,omitempty"`
	// Basis is what the judgement rests on: "pressure" (v2: max or high
	// events rising with full memory pressure), "failcnt" (v1, weaker:
	// failing charges with anonymous memory at the limit) or "under-oom"
	// (v1: the kernel holds the cgroup under OOM, its OOM killer disabled).
	Basis string `json:"basis"`
	// Scope is the cgroup that stalled: "container" (the runner
	// container's own), "pod", or "sibling" (another container of the pod).
	Scope string `json:"scope"`
	// Limit is that cgroup's memory limit in bytes, when it had one.
	// +optional
	Limit *int64 `json:"limit,omitempty"`
}

// Job is a CI job as its fleet names it. Source says where it was read,
// and so who could have written it.
type Job struct {
	// ID is the job's id in the CI service (ARC: the EphemeralRunner's
	// status.jobId; GitLab: the annotation job.runner.gitlab.com/id).
	// +optional
	ID string `json:"id,omitempty"`
	// RequestID is ARC's job request id (status.jobRequestId), which older
	// ARC releases carry without a job id.
	// +optional
	RequestID string `json:"requestID,omitempty"`
	// Run is the workflow run (ARC: status.workflowRunId).
	// +optional
	Run string `json:"run,omitempty"`
	// Project is the repository (ARC: status.jobRepositoryName) or the
	// project (GitLab: the label project.runner.gitlab.com/id).
	// +optional
	Project string `json:"project,omitempty"`
	// Workflow is the workflow's ref (ARC: status.jobWorkflowRef).
	// +optional
	Workflow string `json:"workflow,omitempty"`
	// Name is the job's display name.
	// +optional
	Name string `json:"name,omitempty"`
	// URL is the job's page.
	// +optional
	URL string `json:"url,omitempty"`
	// CreatedBy is the pod's creator as the injector recorded it
	// (runnerguard.io/created-by, which the policy keeps as written at
	// CREATE), for a job read from the pod's marks: whether the fleet's
	// manager wrote them.
	// +optional
	CreatedBy string `json:"createdBy,omitempty"`
	// Source: "EphemeralRunner/<name>" (the status of the pod's owner,
	// matched by UID, which only ARC's controllers write), or "pod" (the
	// pod's labels and annotations named in the preset, which whoever may
	// update pods in the namespace can also write).
	Source string `json:"source"`
}

// Disruption is a pod's DisruptionTarget condition.
type Disruption struct {
	// Reason: EvictionByEvictionAPI, PreemptionByScheduler,
	// DeletionByTaintManager, DeletionByPodGC, TerminationByKubelet.
	Reason string `json:"reason"`
	// +optional
	Message string `json:"message,omitempty"`
}

// NodeState is what the Node object said when a death was recorded: the
// conditions a healthy node does not have and the marks of a node being
// taken away. Only the node's kubelet, the control plane and principals
// allowed to update nodes write these.
type NodeState struct {
	// Gone: no Node of that name existed.
	// +optional
	Gone bool `json:"gone,omitempty"`
	// Conditions lists the node's unhealthy conditions as
	// "Type=Status" (Ready not True, a pressure True).
	// +optional
	Conditions []string `json:"conditions,omitempty"`
	// Taints lists the node's disruption taints by key (Karpenter's
	// karpenter.sh/disrupted, the cluster autoscaler's
	// ToBeDeletedByClusterAutoscaler, the node controller's unreachable
	// and not-ready, a cordon's unschedulable).
	// +optional
	Taints []string `json:"taints,omitempty"`
	// Deleting: the Node object had a deletionTimestamp.
	// +optional
	Deleting bool `json:"deleting,omitempty"`
}

// Vitals is the memory reading the sidecar left as it stopped: the runner
// container's own cgroup when the sidecar saw it (Scope container), else
// the pod's (Scope pod), with the pod's beside the container's where they
// differ.
type Vitals struct {
	// Cgroup is v1 or v2.
	Cgroup string `json:"cgroup"`
	// Scope is "container" (the runner container's cgroup) or "pod".
	// +optional
	Scope string `json:"scope,omitempty"`
	// Memory is the reading of the cgroup Scope names.
	Memory `json:",inline"`
	// Pod is the pod cgroup's reading, when Scope is container and the
	// two differ (the pod's includes the sidecar and other containers).
	// +optional
	Pod *Memory `json:"pod,omitempty"`
	// OOMWatch is how the sidecar learned of OOM kills: "notified" (cgroup
	// v1, the kernel's OOM notification, which counts every kill),
	// "polled" (the counters read at intervals; on v1 a kill is missed
	// when the runtime removes the victim's cgroup first), "inotify" (v2).
	// Absent from sidecars that did not say.
	// +optional
	OOMWatch string `json:"oomWatch,omitempty"`
}

// Memory is one cgroup's reading.
type Memory struct {
	// +optional
	Peak *int64 `json:"peak,omitempty"`
	// +optional
	PeakObserved bool `json:"peakObserved,omitempty"`
	// +optional
	Limit *int64 `json:"limit,omitempty"`
	// PeakUnknown (cgroup v1): the cgroup was removed between the
	// sidecar's last reading of it and its OOM kill, and the highest use
	// read was short of its limit, so its real peak was never read (Peak is
	// left out rather than a stale sample); the kill came at Limit.
	// +optional
	PeakUnknown bool  `json:"peakUnknown,omitempty"`
	OOM         int64 `json:"oom"`
	OOMKill     int64 `json:"oomKill"`
	// +optional
	OOMKillAt *metav1.Time `json:"oomKillAt,omitempty"`
}

// RunnerDeathList is a list of RunnerDeaths.
//
// +kubebuilder:object:root=true
type RunnerDeathList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RunnerDeath `json:"items"`
}
