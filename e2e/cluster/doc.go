// Command cluster brings up and tears down a one-node Kubernetes cluster on
// this machine for the node e2e suite and the demo: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and a kubelet built from source,
// containerd and runc from Debian, the CNI bridge, and cert-manager's
// controllers (e2e/certmanager). Every file lives under one state folder
// (.cache/cluster); every process is ended by the pid it was started with.
//
//	cluster up       start the node and cert-manager (no-op when healthy)
//	cluster install  load the images and install runnerguard with hack/install.sh
//	cluster down     end the processes, remove containers, mounts, bridge
package main
