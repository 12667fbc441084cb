#!/usr/bin/env bash
# Builds the pinned Kubernetes binaries and etcd from the Go module proxy into
# .cache/kube/<version>/bin, once: a warm run finds them and builds nothing.
# Usage: [KUBE_VERSION=v1.N.P] hack/kube.sh [binary ...]   (default: all of them)
# The default version is the one the suites run on, pinned in hack/tools (the
# module every tool of the harness builds from, so they share the packages
# they have in common); make compat asks for older minors, each pinned by
# its own module: hack/kube-1.N pins v1.N.P and its staging modules.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=${KUBE_VERSION:-v1.37.2}
minor=$(echo "$version" | cut -d. -f2)
moddir="$root/hack/tools"
[ "$version" = v1.37.2 ] || moddir="$root/hack/kube-1.$minor"
if ! grep -qE "^[[:space:]]*k8s.io/kubernetes $version\$" "$moddir/go.mod" 2>/dev/null; then
  echo "hack/kube.sh: no module pins k8s.io/kubernetes $version (looked in ${moddir#"$root"/})" >&2
  exit 2
fi
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

for b in "${want[@]}"; do
  [ -n "${pkgs[$b]:-}" ] || { echo "hack/kube.sh: unknown binary $b" >&2; exit 2; }
  [ -x "$out/$b" ] || grep -q "\"${pkgs[$b]}\"" "$moddir"/tools.go ||
    { echo "hack/kube.sh: ${moddir#"$root"/} does not pin $b" >&2; exit 2; }
done
missing() {
  missing=()
  for b in "${want[@]}"; do [ -x "$out/$b" ] || missing+=("$b"); done
  [ ${#missing[@]} -gt 0 ]
}
missing || exit 0
# One build at a time per version: make test's two lanes can ask for the
# same binary, and the second finds it built.
exec 9> "$out/.lock"
flock 9
missing || exit 0

# Without these the server reports v0.0.0-master, which breaks kubectl version
# and version-gated behaviour.
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

cd "$moddir"
# One go build for all of them: the packages they share compile once and
# one binary links while the next compiles. Each main package is written
# under its directory's name (etcd's, go.etcd.io/etcd/server/v3, as server)
# into a scratch directory, then moved into place.
echo ">> building ${missing[*]} $version from the Go module proxy (cold: kube-apiserver alone takes ~10 min on 2 cores)" >&2
start=$SECONDS
tmp="$out/.build"
rm -rf "$tmp" && mkdir -p "$tmp"
build=()
for b in "${missing[@]}"; do build+=("${pkgs[$b]}"); done
# GOTOOLCHAIN=local: an old minor's go directive must not fetch an old Go.
# A minor that needs a newer Go than ours (1.38 needs 1.27) names that Go in
# its module's toolchain line; the go command fetches it from the module
# proxy once. Only such a module has one, so the others build as before.
toolchain=$(awk '$1 == "toolchain" { print $2 }' go.mod)
CGO_ENABLED=0 GOTOOLCHAIN=${toolchain:-local} go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${build[@]}"
for b in "${missing[@]}"; do
  name=${pkgs[$b]##*/}
  [[ ! $name =~ ^v[0-9]+$ ]] || { name=${pkgs[$b]%/*}; name=${name##*/}; }
  mv "$tmp/$name" "$out/$b"
done
rmdir "$tmp"
echo ">> built ${missing[*]} in $((SECONDS - start))s" >&2
