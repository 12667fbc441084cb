package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunnerDeletion is the guard's note that it admitted the deletion of a pod
// whose runner was running: who asked, under which rule, and when. The pod
// watcher reads it to name the deleter in the RunnerDeath, and counts it
// only when the pod's deletion follows. It is named after the pod's UID and
// written only after the pod was confirmed to exist with that UID, so a
// review the API server did not send cannot plant one. The pod watcher's
// collector removes notes an hour after they were written.
//
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="helm.sh/resource-policy=keep"
// +kubebuilder:resource:scope=Namespaced,categories=runnerguard
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.deletion.pod`
// +kubebuilder:printcolumn:name="Requester",type=string,JSONPath=`.deletion.requester`
// +kubebuilder:printcolumn:name="Rule",type=string,JSONPath=`.deletion.rule`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RunnerDeletion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a deletion note is immutable"
	Deletion DeletionNote `json:"deletion"`
}

// DeletionNote is one admitted deletion of a running runner's pod or, with
// Kind EphemeralRunner, of the EphemeralRunner that owns a runner pod.
type DeletionNote struct {
	// Kind is what was deleted: a Pod when empty, or EphemeralRunner (whose
	// pod ARC deletes once the runner's job is over).
	// +optional
	Kind string `json:"kind,omitempty"`
	// Pod is the pod's name (an EphemeralRunner's pod has its name).
	Pod string `json:"pod"`
	// UID is the deleted object's UID.
	UID string `json:"uid"`
	// Requester is the username of the DELETE or eviction.
	Requester string `json:"requester"`
	// Operation is delete or eviction.
	Operation string `json:"operation"`
	// Rule is the guard's rule that allowed it.
	Rule string `json:"rule"`
	// Time is when the guard admitted it.
	Time metav1.Time `json:"time"`
	// StartedBy is who started what this pod deletion completes, when its
	// requester acted for someone else: the requester of the deletion of
	// the pod's EphemeralRunner, as the guard noted it.
	// +optional
	StartedBy string `json:"startedBy,omitempty"`
	// Job is the job the fleet's record named when the guard admitted the
	// deletion (an ARC runner's EphemeralRunner status, read then), kept
	// here because ARC deletes the EphemeralRunner before the pod watcher
	// writes the record.
	// +optional
	Job *Job `json:"job,omitempty"`
	// Reason is the override's reason when the override allowed the
	// deletion (rule override), at most 512 bytes.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// RunnerDeletionList is a list of RunnerDeletions.
//
// +kubebuilder:object:root=true
type RunnerDeletionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RunnerDeletion `json:"items"`
}
