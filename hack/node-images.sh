#!/usr/bin/env bash
# Builds the images the node cluster needs besides runnerguard's own, without
# a Docker engine, into .cache/images:
#   pause.tar   runnerguard.local/e2e/pause:1   the pod sandbox (e2e/images/pause)
#   runner.tar  runnerguard.local/e2e/runner:1  the runner stand-in: Debian's
#               busybox-static and e2e/images/runner/runner.sh
# Each is rebuilt only when its inputs change (a checksum next to it).
# Usage: hack/node-images.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/.cache/images"
mkdir -p "$out"
"$root/hack/debian.sh" busybox-static

pause_sum=$(cat "$root/e2e/images/pause/main.go" "$root/go.mod" | sha256sum | cut -c1-16)
runner_sum=$(cat "$root/e2e/images/runner/runner.sh" /bin/busybox | sha256sum | cut -c1-16)
fresh() { [ -f "$out/$1.tar" ] && [ "$(cat "$out/$1.sum" 2>/dev/null)" = "$2" ]; }
if fresh pause "$pause_sum" && fresh runner "$runner_sum"; then
  exit 0
fi

"$root/hack/tools.sh" crane
crane="$root/.cache/bin/crane"
# shellcheck source=hack/registry.sh
. "$root/hack/registry.sh"

# image <name> <checksum> <rootfs dir> <entrypoint> [cmd]
image() {
  local name=$1 sum=$2 rootfs=$3 entrypoint=$4 cmd=${5:-}
  local ref="runnerguard.local/e2e/$name:1" local_ref="127.0.0.1:$port/e2e/$name:1"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$rootfs" -cf "$work/$name.tar" .
  "$crane" append --oci-empty-base --platform linux/amd64 -f "$work/$name.tar" -t "$local_ref" > /dev/null 2>> "$work/crane.log"
  local args=(--set-platform linux/amd64 --entrypoint "$entrypoint")
  [ -z "$cmd" ] || args+=(--cmd "$cmd")
  "$crane" mutate "$local_ref" "${args[@]}" -t "$ref" -o "$out/$name.tar.tmp" > /dev/null
  mv "$out/$name.tar.tmp" "$out/$name.tar"
  echo "$sum" > "$out/$name.sum"
  echo "$ref -> $out/$name.tar ($(du -h "$out/$name.tar" | cut -f1))"
}

if ! fresh pause "$pause_sum"; then
  mkdir -p "$work/pause"
  (cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$work/pause/pause" ./e2e/images/pause)
  image pause "$pause_sum" "$work/pause" /pause
fi
if ! fresh runner "$runner_sum"; then
  r="$work/runner"
  mkdir -p "$r/bin" "$r/tmp"
  chmod 1777 "$r/tmp"
  cp /bin/busybox "$r/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -s busybox "$r/bin/$applet"
  done
  install -m 0755 "$root/e2e/images/runner/runner.sh" "$r/runner.sh"
  image runner "$runner_sum" "$r" /bin/sh,/runner.sh job,30
fi
