// Package fleet is what runnerguard knows of each fleet's own records of
// its runners, and the reads and the one write that go with it: the job
// a pod runs as GitLab's and other pod-marking fleets state it on the pod
// (JobFromPod), the job and the job signal an ARC scale-set runner's
// EphemeralRunner states (ReadEphemeralRunner, JobFromEphemeralRunner),
// and the runner label that puts a runner pod the injector never saw in
// the recorder's view (Label). The guard, the recorder and the drain
// command read a fleet through it alone, so each fleet's knowledge has
// one home. The pure keys and rules stay in runnerpod.
package fleet
