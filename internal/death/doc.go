// Package death classifies how a runner ended and plans its record: the
// exit code, signal, reason and class, the vitals' final reading, who
// deleted the pod, the job and the node's state, and whether and when the
// recorder writes it (Plan). Decide returns the records as they are
// written. It touches no API itself: it reads the pods and notes handed to
// it, and what the pod's status does not hold (the job, the node) through
// the reads the caller hands it, made only for a death about to be
// recorded.
//
// Its files follow a record as it is built, and a function calls mostly
// into its own file or a later one, so they read in one pass (the Class
// and Record types are used throughout): observation.go (what the watcher
// saw, Decide, and the decision's finish), deaths.go (which containers'
// ends are deaths: one a runner, one for a job of several parts),
// disruption.go (how the pod's end came about: a DisruptionTarget, a
// deletion, the guard's note as far as the pod bears it out), class.go
// (the class the runner's end shows), reclass.go (the class later
// evidence changes: the deleter, the vitals, the node), account.go and
// stall.go (what the record keeps of the status, the vitals, a stall and
// the node), record.go (the record, its object, its labels and its
// Event), and words.go (each class as a person reads it: its meaning, its
// title, whether it is told), which stands apart.
package death
