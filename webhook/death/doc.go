// Package death classifies how a runner ended and builds its death record
// (exit code, signal, reason, class, the vitals' final reading, who deleted
// the pod), decides what the pod watcher records and when (Plan), and reads
// records back for `runnerguard why` (Lookup). Everything but Lookup is a
// pure function of the pod.
package death
