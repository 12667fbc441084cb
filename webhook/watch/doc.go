// Package watch is the pod watcher, leader-elected in the webhook's
// manager: the one writer of RunnerDeath records (every runner death the
// kubelet reports, restarts in place included, and runners whose pod was
// removed while they ran), the RunnerStuck reports, the retention collector
// of records and deletion notes, and the labeler that brings runner pods
// the injector did not see into its cache of labelled runner pods.
package watch
