// Package death classifies how a runner ended and plans its record: the
// exit code, signal, reason and class, the vitals' final reading, who
// deleted the pod, the job and the node's state, and whether and when the
// recorder writes it (Plan). Decide returns the records as they are
// written. It touches no API itself: it reads the pods and notes handed to
// it, and what the pod's status does not hold (the job, the node) through
// the reads the caller hands it, made only for a death about to be
// recorded.
//
// Its files follow a record as it is built, and a function calls only into
// its own file or a later one, so they read in one pass (the Class and
// Record types are used throughout; note.go tells the record built before
// it, and job.go, the fleets' job readers, stands apart):
// observation.go (what the watcher saw, Decide), class.go (the class the
// runner's end shows), reclass.go (the class later evidence changes: the
// deleter, the vitals, the node), account.go (what the record keeps of the
// status, the vitals and the node), record.go (the record and its object),
// note.go (its Event), and job.go (the job as the fleets state it).
package death
