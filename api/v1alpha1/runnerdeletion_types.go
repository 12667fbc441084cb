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

// DeletionNote is one admitted deletion of a running runner's pod.
type DeletionNote struct {
	Pod string `json:"pod"`
	UID string `json:"uid"`
	// Requester is the username of the DELETE or eviction.
	Requester string `json:"requester"`
	// Operation is delete or eviction.
	Operation string `json:"operation"`
	// Rule is the guard's rule that allowed it.
	Rule string `json:"rule"`
	// Time is when the guard admitted it.
	Time metav1.Time `json:"time"`
}

// RunnerDeletionList is a list of RunnerDeletions.
//
// +kubebuilder:object:root=true
type RunnerDeletionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RunnerDeletion `json:"items"`
}
