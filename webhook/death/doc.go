// Package death classifies how a runner ended and builds the death record:
// exit code, signal, reason, class, the vitals' final reading, and who
// deleted the pod. Pure functions of the pod; no I/O.
package death
