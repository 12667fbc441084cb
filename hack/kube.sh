#!/usr/bin/env bash
# Builds the pinned Kubernetes binaries and etcd from the Go module proxy into
# .cache/kube/<version>/bin, once: a warm run finds them and builds nothing.
# Usage: hack/kube.sh [binary ...]   (default: all of them)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=v1.37.2
minor=$(echo "$version" | cut -d. -f2)
out="$root/.cache/kube/$version/bin"
mkdir -p "$out"

declare -A pkgs=(
  [etcd]=go.etcd.io/etcd/server/v3
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
)
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(etcd kube-apiserver kubectl kube-controller-manager kube-scheduler kubelet)

missing=()
for b in "${want[@]}"; do
  [ -n "${pkgs[$b]:-}" ] || { echo "hack/kube.sh: unknown binary $b" >&2; exit 2; }
  [ -x "$out/$b" ] || missing+=("$b")
done
[ ${#missing[@]} -gt 0 ] || exit 0

# Without these the server reports v0.0.0-master, which breaks kubectl version
# and version-gated behaviour.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

cd "$root/hack/kube"
for b in "${missing[@]}"; do
  echo ">> building $b $version from the Go module proxy (cold: kube-apiserver takes ~10 min on 2 cores)" >&2
  start=$SECONDS
  CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$out/$b.tmp" "${pkgs[$b]}"
  mv "$out/$b.tmp" "$out/$b"
  echo ">> built $b in $((SECONDS - start))s" >&2
done
