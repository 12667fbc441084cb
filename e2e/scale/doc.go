// Package scale measures runnerguard against a simulated fleet:
// the real kube-apiserver and etcd of the other suites, runnerguard as two
// leader-electing replicas, and kwok playing the kubelet of 100+ fake
// Nodes through the Stages in testdata. A simulator creates generic and
// GitLab-like runner pods in a burst, then kills them the ways fleets do
// (natural exits, the GitLab manager ending jobs, a reaper, a drain, a
// leader kill) and, since it knows every death it caused, scores the
// death records and prints what runnerguard cost. Run through make scale
// (sizes from SCALE_RUNNERS, SCALE_NODES) or make scale-smoke.
package scale
