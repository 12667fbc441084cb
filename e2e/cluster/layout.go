package main

import (
	"fmt"
	"path/filepath"
)

// The cluster's addresses. Pods live on the CNI bridge in podCIDR. The
// service range is next to it and its first address, the "kubernetes"
// Service's ClusterIP, is put on the host's loopback device and is where the
// API server listens: pods reach the API server through the in-cluster
// config without kube-proxy, and the host reaches it locally. The API
// server dials webhook pods on their bridge addresses
// (--enable-aggregator-routing), so no ClusterIP ever needs routing.
const (
	nodeName       = "runnerguard-node"
	apiserverIP    = "10.244.1.1"
	apiserverPort  = 443
	serviceCIDR    = "10.244.1.0/24"
	podCIDR        = "10.244.0.0/24"
	bridgeName     = "rgcni0"
	cniNetworkName = "runnerguard-e2e"
	etcdClientPort = 23790
	etcdPeerPort   = 23800
	kubeletPort    = 10250
	kubeletHealthz = 10248
	// clusterDNS is named in pods' resolv.conf and served by nobody: no
	// pod here resolves names, and without it the kubelet puts a
	// MissingClusterDNS Warning Event on every pod.
	clusterDNS = "10.244.1.10"
	// pauseImage is the pod sandbox image containerd is told to use; it
	// is built locally (e2e/images/pause) and imported, as are the runner
	// stand-ins; runnerguard's own image comes from the cluster's registry.
	pauseImage = "runnerguard.local/e2e/pause:1"
)

func apiserverURL() string { return fmt.Sprintf("https://%s:%d", apiserverIP, apiserverPort) }

// layout names every path of one cluster below its state folder.
type layout struct {
	dir    string // the state folder, e.g. .cache/cluster
	kube   string // the Kubernetes binaries
	images string // the image tarballs (.cache/images)
	cm     string // the certmanager binary
	crane  string // crane, which serves the cluster's registry
	repo   string // the repository root
}

func (l layout) path(elem ...string) string {
	return filepath.Join(append([]string{l.dir}, elem...)...)
}
func (l layout) pki(name string) string { return l.path("pki", name) }
func (l layout) kubeconfig(c string) string {
	return l.path(c + ".kubeconfig")
}
func (l layout) log(name string) string { return l.path("logs", name+".log") }
func (l layout) pid(name string) string { return l.path("pids", name+".pid") }
func (l layout) bin(name string) string { return filepath.Join(l.kube, name) }

// containerdSocket is kept short: unix socket paths are limited to 108 bytes.
func (l layout) containerdSocket() string { return l.path("run", "containerd.sock") }
