package v1alpha1

// What a death record carries of others' word: the fleet's job, the control
// plane's disruption, the node's state, the vitals sidecar's reading and
// stall. Each type says who could have written it.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
	// Commit is the commit the job ran (Woodpecker: the step's
	// CI_COMMIT_SHA, as the injector copied it at CREATE).
	// +optional
	Commit string `json:"commit,omitempty"`
	// Forge is the forge the job's repository is on (Woodpecker: its
	// forge type, github or gitlab among others).
	// +optional
	Forge string `json:"forge,omitempty"`
	// RepositoryID is the forge's own id of the job's repository
	// (Woodpecker: the label woodpecker-ci.org/repo-forge-id, which its
	// server writes and a pipeline cannot).
	// +optional
	RepositoryID string `json:"repositoryID,omitempty"`
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
	// "Type=Status" (Ready not True, a pressure True), and its notices of
	// being taken away (DrainInProgress or MaintenancePlanned True, where
	// the node-lifecycle conditions are set).
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

// EvictionRequestRef names the eviction request a runner's pod went on,
// as the Eviction runnerguard answered stated it: the controller makes each
// EvictionRequest an owner of the Eviction and lists its requester with
// its intent. Only the requesters that still asked are named.
type EvictionRequestRef struct {
	// Names are the EvictionRequests, in the pod's namespace.
	// +optional
	Names []string `json:"names,omitempty"`
	// Requesters are who asked (their spec.requester, a domain-prefixed
	// name such as runnerguard.io/drain).
	// +optional
	Requesters []string `json:"requesters,omitempty"`
	// Eviction is the Eviction the controller made of them.
	// +optional
	Eviction string `json:"eviction,omitempty"`
	// HeldFor is how long runnerguard held the busy runner before it let
	// it go; zero when it let it go at once.
	// +optional
	HeldFor *metav1.Duration `json:"heldFor,omitempty"`
}
