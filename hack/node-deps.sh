#!/usr/bin/env bash
# Installs and builds everything the one-node cluster needs, once; a warm run
# builds nothing. Debian packages (containerd, runc, CNI plugins,
# busybox-static), the Kubernetes binaries from source (hack/kube.sh), Helm
# and crane (hack/tools.sh), the cert-manager runner (e2e/certmanager) and
# the node's own images (hack/node-images.sh). runnerguard's image is built
# by `go run ./e2e/cluster install` (hack/release.sh to the cluster's
# registry).
# Usage: hack/node-deps.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
say() { echo ">> $*" >&2; }
[ "$(id -u)" = 0 ] || { echo "hack/node-deps.sh: run as root (apt, containerd, kubelet)" >&2; exit 1; }

"$root/hack/debian.sh" containerd runc containernetworking-plugins busybox-static iproute2

kube=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet)
for b in "${kube[@]}"; do
  if [ ! -x "$root/.cache/kube/v1.37.2/bin/$b" ]; then
    say "building the control plane and kubelet from the Go module proxy; cold, this takes 25-35 minutes on 2 cores (once)"
    break
  fi
done
"$root/hack/kube.sh" "${kube[@]}"
"$root/hack/tools.sh" helm crane

# cert-manager's controllers, rebuilt when the runner's sources change.
"$root/hack/certmanager.sh"

"$root/hack/node-images.sh"
