// Package recorder is the pod watcher, leader-elected in runnerguard's
// manager: the one writer of RunnerDeath records (every runner death the
// kubelet reports, restarts in place included, and runners whose pod was
// removed while they ran), of the RunnerStuck reports, of retention (old
// records and deletion notes go), and the labeler that brings runner pods
// the injector did not see into its cache of labelled runner pods. Label,
// the one writer of the runner label after creation, is called by the
// labeler and, on every replica, by the guard.
package recorder
