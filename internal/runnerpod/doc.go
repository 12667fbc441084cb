// Package runnerpod is the pure domain of runner pods: which pods are runner
// pods and of which fleet (preset), which container is the runner, what state
// it is in, and the annotation and label keys runnerguard reads and writes.
// It imports only the Kubernetes API types.
package runnerpod
