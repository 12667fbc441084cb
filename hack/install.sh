#!/usr/bin/env bash
# make install: installs what this checkout builds into the cluster your
# kubeconfig names, before any release is published. Needs Go, git and a
# cluster with cert-manager; Helm is used from $HELM or PATH, else built.
#
# The image (hack/image.sh: both platforms, no Docker engine) goes either
#   to a registry you name:      REGISTRY=registry.example.com/team hack/install.sh
#     (REGISTRY/runnerguard:VERSION; log in first with crane or docker, or
#     set REGISTRY_USER and REGISTRY_PASSWORD), and the chart is installed
#     from ./charts/runnerguard with the image pinned by digest; with
#     PUBLISH=1 the chart is pushed beside it (hack/release.sh, as a
#     release is) and installed from oci://REGISTRY/charts/runnerguard;
#   or into a local cluster's node: LOAD=kind|k3d|minikube hack/install.sh
#     (CLUSTER names a kind or k3d cluster or a minikube profile; ARCH the
#     node's architecture, default this machine's), tagged
#     runnerguard.local/runnerguard:VERSION-COMMIT, never pulled.
# Then `helm upgrade --install RELEASE` (default runnerguard) into NAMESPACE
# (default runnerguard) with --wait. Arguments are passed to Helm:
#   hack/install.sh --kube-context prod -f my-values.yaml
# PRESETS names the fleets you run (arc-scale-set, arc-workflow,
# arc-legacy, gitlab, generic; comma-separated: presets.enabled): the
# chart's default judges and instruments no pod. The chart's defaults start
# in warn mode; pass --set guard.rollout=enforce to enforce.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "hack/install.sh: $*" >&2; exit 1; }
release=${RELEASE:-runnerguard}
namespace=${NAMESPACE:-runnerguard}
registry=${REGISTRY:-}
registry=${registry%/}
load=${LOAD:-}
[ -n "$registry" ] || [ -n "$load" ] || fail "set REGISTRY=host/path (the image is pushed there) or LOAD=kind|k3d|minikube (the image is loaded into the node)"
[ -z "$registry" ] || [ -z "$load" ] || fail "set REGISTRY or LOAD, not both"
case "$load" in "" | kind | k3d | minikube) ;; *) fail "LOAD=$load: want kind, k3d or minikube" ;; esac
[ -z "${PUBLISH:-}" ] || [ -n "$registry" ] || fail "PUBLISH=1 pushes the chart beside the image: it needs REGISTRY"

helm=${HELM:-}
if [ -z "$helm" ]; then
  helm=$(command -v helm || true)
  [ -n "$helm" ] || { "$root/hack/tools.sh" helm && helm="$root/.cache/bin/helm"; }
fi
"$root/hack/tools.sh" crane
crane="$root/.cache/bin/crane"
chart=("$root/charts/runnerguard")
image_values=()

if [ -n "${PUBLISH:-}" ]; then
  # The image and the chart (its image pinned by digest) to REGISTRY.
  "$root/hack/release.sh"
  version=$(sed -n 's/^version=//p' "$root/.cache/release/outputs")
  chart=("oci://$registry/charts/runnerguard" --version "$version")
  case "${registry%%/*}" in 127.0.0.1:* | localhost:* | localhost | "[::1]:"*) chart+=(--plain-http) ;; esac
elif [ -n "$registry" ]; then
  if [ -n "${REGISTRY_USER:-}" ]; then
    "$crane" auth login "${registry%%/*}" -u "$REGISTRY_USER" --password-stdin <<< "${REGISTRY_PASSWORD:?}" >/dev/null
  fi
  # shellcheck source=hack/buildinfo.sh
  . "$root/hack/buildinfo.sh"
  "$root/hack/image.sh" "$registry/runnerguard:$version"
  image_values=(--set "image.repository=$registry/runnerguard" --set "image.digest=$(cat "$root/.cache/images/runnerguard.digest")")
else
  # shellcheck source=hack/buildinfo.sh
  . "$root/hack/buildinfo.sh"
  tag="$version-${commit:0:12}"
  [[ $commit != *-dirty ]] || tag+=-dirty
  arch=${ARCH:-$(uname -m)}
  case "$arch" in x86_64 | amd64) arch=amd64 ;; aarch64 | arm64) arch=arm64 ;; *) fail "ARCH=$arch: want amd64 or arm64" ;; esac
  # hack/image.sh copies the index to a loopback registry of our own; the
  # node's platform comes back out of it as the archive the tools load.
  # shellcheck source=hack/registry.sh
  . "$root/hack/registry.sh"
  ref="runnerguard.local/runnerguard:$tag"
  "$root/hack/image.sh" "127.0.0.1:$port/runnerguard:$tag"
  "$crane" pull --platform "linux/$arch" "127.0.0.1:$port/runnerguard:$tag" "$work/pulled.tar"
  # crane names the archive's image after where it pulled it from: the
  # node must know it as $ref, the name the chart is given.
  mkdir "$work/archive"
  tar -xf "$work/pulled.tar" -C "$work/archive"
  sed -i.orig "s#127\.0\.0\.1:$port/runnerguard:$tag#$ref#g" "$work/archive/manifest.json"
  rm "$work/archive/manifest.json.orig"
  grep -q "\"$ref\"" "$work/archive/manifest.json" || fail "the archive does not name $ref: $(cat "$work/archive/manifest.json")"
  (cd "$work/archive" && tar -cf "$work/image.tar" -- *)
  echo ">> loading $ref (linux/$arch) into the $load node" >&2
  case "$load" in
    kind) kind load image-archive "$work/image.tar" ${CLUSTER:+--name "$CLUSTER"} ;;
    k3d) k3d image import "$work/image.tar" ${CLUSTER:+--cluster "$CLUSTER"} ;;
    minikube) minikube image load "$work/image.tar" ${CLUSTER:+--profile "$CLUSTER"} ;;
  esac
  image_values=(--set "image.repository=runnerguard.local/runnerguard" --set "image.tag=$tag" --set "image.pullPolicy=IfNotPresent")
fi

if [ -n "${PRESETS:-}" ]; then
  # One --set with the braces quoted: Helm's list, not the shell's brace
  # expansion.
  image_values+=(--set "presets.enabled={$PRESETS}")
fi
echo ">> helm upgrade --install $release ${chart[*]} -n $namespace" >&2
"$helm" upgrade --install "$release" "${chart[@]}" --namespace "$namespace" --create-namespace --wait --timeout 5m \
  "${image_values[@]}" "$@"
cat <<EOF
runnerguard is installed as release $release in namespace $namespace (from this checkout; no release is published yet).
Next:
  kubectl label namespace <runners-namespace> runnerguard.io/enabled=true
  go build -o ~/bin/kubectl-runnerguard ./cmd/runnerguard    # the kubectl plugin
  kubectl runnerguard check --wait 2m
EOF
