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
cm="$root/.cache/certmanager"
sum=$(cat "$root"/e2e/certmanager/*.go "$root"/e2e/certmanager/go.mod "$root"/e2e/certmanager/go.sum | sha256sum | cut -c1-16)
if [ ! -x "$cm/certmanager" ] || [ "$(cat "$cm/certmanager.sum" 2>/dev/null)" != "$sum" ]; then
  say "building cert-manager's controllers (e2e/certmanager); cold, about 4 minutes"
  mkdir -p "$cm"
  start=$SECONDS
  CGO_ENABLED=0 go build -C "$root/e2e/certmanager" -trimpath -ldflags "-s -w" -o "$cm/certmanager.tmp" .
  mv "$cm/certmanager.tmp" "$cm/certmanager"
  echo "$sum" > "$cm/certmanager.sum"
  say "built cert-manager's controllers in $((SECONDS - start))s"
fi

"$root/hack/node-images.sh"
