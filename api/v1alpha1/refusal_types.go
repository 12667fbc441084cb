package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Refusals is what runnerguard refused to let be done to a runner, or in
// warn mode would have refused: one entry per requester, verb and mode, kept on the runner's pod while it lives
// (the annotation runnerguard.io/refusals, which only runnerguard may
// write) and copied onto its death record.
type Refusals struct {
	// Entries are the requesters refused, the first refused first.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	Entries []Refusal `json:"entries"`
	// Dropped counts the entries pushed out to keep the list short: the
	// fewest refusals, the least lately, went first.
	// +optional
	Dropped int32 `json:"dropped,omitempty"`
}

// Refusal is one requester's refused attempts at one verb on a runner.
type Refusal struct {
	// By is the requester's username as the API server authenticated it.
	// +kubebuilder:validation:MaxLength=256
	By string `json:"by"`
	// Verb is what was refused: delete, eviction, exec or attach.
	// +kubebuilder:validation:MaxLength=32
	Verb string `json:"verb"`
	// Rule is the guard's rule of the latest refusal (busy, job-assigned,
	// owner-unknown, ...).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Rule string `json:"rule,omitempty"`
	// First and Last are when the guard decided the first and the latest
	// refusal.
	First metav1.MicroTime `json:"first"`
	Last  metav1.MicroTime `json:"last"`
	// Count is how many attempts were refused: the API server's second
	// review of one request (it asks again when it judged a delete on a
	// stale copy of the pod), decided within a moment of another on
	// another copy, is the same attempt. It stops at its largest value
	// rather than wrap.
	// +kubebuilder:validation:Minimum=1
	Count int32 `json:"count"`
	// Warned: the guard was in warn mode and let the attempts through;
	// enforce mode would have refused them. Kept as a refusal is, so a
	// rollout's warn week leaves evidence.
	// +optional
	Warned bool `json:"warned,omitempty"`
	// Version is the pod's resourceVersion the latest refusal was decided
	// on.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`
}
