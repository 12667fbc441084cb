// Package node holds the node e2e suite (build tag node): real runner
// stand-ins in real containers under a real kubelet, with cert-manager
// issuing the webhook's certificates and the chart installed by Helm. Run it
// with make e2e-node, which brings the cluster up (e2e/cluster) first.
package node
