// Package runnerpod is the shared words of runner pods: a preset's
// configuration, the runner's state, the guard's pod-level rules that no
// fleet decides (state, override, cap, deadline), the names of the
// guard's rules, the job as a pod's marks state it, and runnerguard's own
// annotation and label keys. What differs by fleet lives in
// internal/fleet/<name>, listed by internal/presets. It imports only the
// Kubernetes API types and runnerguard's own.
package runnerpod
