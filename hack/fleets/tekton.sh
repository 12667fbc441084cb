#!/usr/bin/env bash
# Builds Tekton Pipelines (github.com/tektoncd/pipeline, from the Go module
# proxy, unchanged) for the real-fleet suite:
#   .cache/fleets/tekton/controller   Tekton's controller (cmd/controller),
#                                     run on the host as its ServiceAccount
#   .cache/fleets/tekton/config       Tekton's release config (config/: the
#                                     CRDs, RBAC, config maps), as the module
#                                     ships it; the suite applies what the
#                                     controller needs
#   .cache/images/tekton-images.tar   runnerguard.local/e2e/tekton:1, the
#                                     binaries a TaskRun's pod runs, where ko
#                                     puts them: /ko-app/entrypoint, nop,
#                                     workingdirinit, sidecarlogresults
#                                     (entrypoint /ko-app/nop, which the nop
#                                     image needs; the others are called by
#                                     path)
# Tekton's own webhook (cmd/webhook) is not built: the suite creates
# TaskRuns as v1, the CRDs' storage version, so no conversion is ever
# asked for, and the controller applies the defaults itself.
# Each is rebuilt only when its inputs change (a checksum next to it).
# TEKTON_VERSION picks another version of the module.
# Usage: hack/fleets/tekton.sh   (after hack/node-images.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
version=${TEKTON_VERSION:-v1.15.0}
out="$root/.cache/fleets/tekton"
images="$root/.cache/images"
mkdir -p "$out" "$images"

src=$(cd / && go mod download -json "github.com/tektoncd/pipeline@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$src/cmd/controller" ] || { echo "tekton: no source for github.com/tektoncd/pipeline@$version" >&2; exit 1; }

sum=$( (echo "$version"; go version; cat "$0") | sha256sum | cut -c1-16)
if [ ! -x "$out/controller" ] || [ "$(cat "$out/tekton.sum" 2>/dev/null)" != "$sum" ]; then
  echo ">> building Tekton Pipelines $version (the controller and the pod's binaries; minutes on a cold cache)" >&2
  rm -rf "$out/bin.tmp" && mkdir -p "$out/bin.tmp"
  (cd "$src" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$out/bin.tmp/" \
    ./cmd/controller ./cmd/entrypoint ./cmd/nop ./cmd/workingdirinit ./cmd/sidecarlogresults)
  rm -rf "$out/config"
  cp -r "$src/config" "$out/config"
  chmod -R u+w "$out/config"
  rm -rf "$out/bin" && mv "$out/bin.tmp" "$out/bin"
  ln -sf bin/controller "$out/controller"
  echo "$sum" > "$out/tekton.sum"
fi

img_sum=$(cat "$out"/bin/{entrypoint,nop,workingdirinit,sidecarlogresults} "$0" | sha256sum | cut -c1-16)
if [ -f "$images/tekton-images.tar" ] && [ "$(cat "$images/tekton-images.sum" 2>/dev/null)" = "$img_sum" ]; then
  exit 0
fi
"$root/hack/tools.sh" crane
crane="$root/.cache/bin/crane"
# shellcheck source=hack/registry.sh
. "$root/hack/registry.sh"
r="$work/tekton"
mkdir -p "$r/ko-app" "$r/tmp"
chmod 1777 "$r/tmp"
for b in entrypoint nop workingdirinit sidecarlogresults; do
  install -m 0755 "$out/bin/$b" "$r/ko-app/$b"
done
ref=runnerguard.local/e2e/tekton:1 local_ref="127.0.0.1:$port/e2e/tekton:1"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$r" -cf "$work/tekton.tar" .
"$crane" append --oci-empty-base --platform linux/amd64 -f "$work/tekton.tar" -t "$local_ref" > /dev/null 2>> "$work/crane.log"
"$crane" mutate "$local_ref" --set-platform linux/amd64 --entrypoint /ko-app/nop -t "$ref" -o "$images/tekton-images.tar.tmp" > /dev/null
mv "$images/tekton-images.tar.tmp" "$images/tekton-images.tar"
echo "$img_sum" > "$images/tekton-images.sum"
echo "$ref -> $images/tekton-images.tar ($(du -h "$images/tekton-images.tar" | cut -f1))"
