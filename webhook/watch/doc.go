// Package watch is the pod watcher: it records every runner death the
// kubelet reports (including restarts in place and deaths whose deletion the
// guard never saw) and warns about runners stuck before they start. It runs
// leader-elected in the webhook's manager, on a cache of stripped pods.
package watch
