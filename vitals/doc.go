// Package vitals is the sidecar's sampling loop: it reads the pod's memory
// cgroup at an interval and at once when the OOM counters change, streams
// each reading as a JSON line, keeps the shared folder's files current and
// leaves a compact final reading in the termination message.
package vitals
