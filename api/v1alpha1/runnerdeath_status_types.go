package v1alpha1

// The record's status: the reporter's account, which changes as the
// record never does.

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunnerDeathStatus is the reporter's account of a death: one report per
// destination, kept on the record so that a new leader neither loses nor
// repeats one.
type RunnerDeathStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=destination
	Reports []Report `json:"reports,omitempty"`
	// FleetView is the CI system's own account of how the job ended, as
	// it keeps it on an object of its own (Tekton's TaskRun, the Job
	// Buildkite's stack made for the job), kept beside the record's class:
	// the two can disagree (a TaskRun whose pod was evicted told as
	// succeeded). Written once, by the leader, when the system's account
	// is final.
	// +optional
	FleetView *FleetView `json:"fleetView,omitempty"`
}

// FleetView is a condition of the system's own object, as it read when
// final.
type FleetView struct {
	// Object is the system's object, as kind/name.
	Object string `json:"object"`
	// Condition is the condition read (TaskRun: Succeeded; Job: Complete
	// or Failed), Status its status.
	Condition string `json:"condition"`
	Status    string `json:"status"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// At is when the condition last changed, as the system wrote it.
	// +optional
	At *metav1.Time `json:"at,omitempty"`
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
