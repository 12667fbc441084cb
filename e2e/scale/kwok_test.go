//go:build scale

package scale

// nodeLabel marks the Nodes kwok plays; no other Node exists here, but the
// selector keeps kwok off any a later setup might add.
const nodeLabel = "sim.runnerguard.io/node"
