#!/usr/bin/env bash
# Builds Karpenter's kwok provider (sigs.k8s.io/karpenter/kwok: Karpenter's
# own controllers, its cloud provider creating kwok-played Nodes) from the
# Go module proxy into .cache/tools/karpenter-<version>, once, with its CRDs
# beside it, and links .cache/bin/karpenter-kwok. The version is the one
# hack/tools/go.mod pins (the module all the harness's tools build from, so
# they share what they have in common; runnerguard's go.mod stays free of
# Karpenter's dependencies). A warm run builds nothing.
# Usage: hack/karpenter.sh   (prints the directory holding the binary and crds/)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
moddir="$root/hack/tools"
version=$(grep -oE '^(require )?[[:space:]]*sigs.k8s.io/karpenter v[^ ]+' "$moddir/go.mod" | awk '{ print $NF }' | head -1)
[ -n "$version" ] || { echo "hack/karpenter.sh: hack/tools/go.mod pins no sigs.k8s.io/karpenter" >&2; exit 2; }
dir="$root/.cache/tools/karpenter-$version"
mkdir -p "$root/.cache/tools"
# One build at a time: the second caller finds it built.
exec 9> "$dir.lock"
flock 9
if [ ! -x "$dir/karpenter-kwok" ] || [ ! -d "$dir/crds" ]; then
  echo ">> building Karpenter's kwok provider $version from the Go module proxy" >&2
  start=$SECONDS
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp/crds"
  cd "$moddir"
  # GOTOOLCHAIN=local: build with the Go the rest of the repository uses.
  CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly go build -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=$version" \
    -o "$dir.tmp/karpenter-kwok" sigs.k8s.io/karpenter/kwok
  # The CRDs of the same version, from the module the binary was built from.
  src=$(GOTOOLCHAIN=local GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' sigs.k8s.io/karpenter)
  cp "$src"/kwok/charts/crds/karpenter.sh_*.yaml "$src"/kwok/apis/crds/*.yaml "$dir.tmp/crds/"
  chmod -R u+w "$dir.tmp"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  echo ">> built Karpenter's kwok provider in $((SECONDS - start))s" >&2
fi
mkdir -p "$root/.cache/bin"
ln -sfn "$dir/karpenter-kwok" "$root/.cache/bin/karpenter-kwok"
echo "$dir"
