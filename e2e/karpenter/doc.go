// Package karpenter measures the autoscalers' marks against the real
// Karpenter: Karpenter's kwok provider (hack/karpenter.sh)
// provisions and consolidates Nodes that kwok plays the kubelet of, the
// real kube-scheduler places ARC scale-set runner pods on them, and
// runnerguard runs as the real binary. Three setups run side by side, each
// with a NodePool of its own: runner pods with no marks (no runnerguard),
// with the static marks the injector used to add to every runner pod, and
// in a namespace runnerguard guards, whose leader marks a runner only while
// it is busy. Nodes hold idle runners, busy runners and a mix; jobs end
// during the run. The report counts node-seconds held by nodes whose
// runners are all idle, busy runners lost, and marks left after a job. Run
// through make karpenter (full) or make karpenter-smoke (part of make
// test).
package karpenter
