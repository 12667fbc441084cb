// Package v1alpha1 is the runnerguard.io/v1alpha1 API: RunnerDeath, the
// lasting record of one runner's death, and RunnerDeletion, the guard's note
// of who asked for a running runner's pod to be deleted. Only runnerguard's
// ServiceAccount writes either.
//
// +kubebuilder:object:generate=true
// +groupName=runnerguard.io
package v1alpha1
