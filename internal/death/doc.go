// Package death classifies how a runner ended and plans its record: the
// exit code, signal, reason and class, the vitals' final reading, who
// deleted the pod, and whether and when the recorder writes it (Plan). It
// is pure: it reads pods and notes handed to it and touches no API.
package death
