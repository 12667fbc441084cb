// Package fleet is what a CI fleet is to runnerguard: the Fleet interface
// each fleet answers (how its pods are recognised, its own idle signal,
// its zombies, who ends its jobs, when a job began, where a death is told, what the
// chart states of it), the optional RecordReader of a fleet that keeps
// its own record of a runner's job on the cluster (ARC's EphemeralRunner),
// and the runner label's one writer after a pod's creation (Label).
//
// Each fleet is one package below this one: arcscaleset, arcworkflow,
// arclegacy, gitlab, tekton, buildkite, woodpecker, jenkins, generic.
// internal/presets lists them; every other package asks the interface
// through presets and never names a fleet (hack's layers test holds it). To add a fleet: a package here that
// answers Fleet, from the system's own source; a line in presets.All;
// `make fleet-table` for the chart; a section in docs/install/fleets.md.
package fleet
