// Package drain is what `kubectl runnerguard drain` decides, apart from
// the API: which runner pods on the nodes go at once and which are waited
// for, what happens at the deadline, the permissions the drain needs, the
// progress it shows, and the exit code its outcome ends with. Pure: the
// command reads the cluster, calls these, and carries out what they say.
package drain
