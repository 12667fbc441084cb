// Package cgroup finds a pod's memory cgroup on the node (cgroup v1 or v2,
// systemd or cgroupfs driver, any QoS class) from the pod UID, and reads it
// and its container cgroups into a record.Line: through containerd/cgroups
// for the values; for OOM kills, inotify (v2), or on v1 the kernel's OOM
// notification where it can be registered beside a short poll.
package cgroup
