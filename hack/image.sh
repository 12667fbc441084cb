#!/usr/bin/env bash
# Builds the image the Dockerfile describes, without a Docker engine: the
# static binaries /runnerguard and /vitals plus the same /etc/passwd,
# /etc/group and /tmp, as one tar layer on an empty OCI base (linux/amd64),
# entrypoint /runnerguard, user 65532. Written to .cache/images/runnerguard.tar
# as ghcr.io/runnerguard/runnerguard:<version>, in the tarball format that
# `ctr images import`, `docker load` and `podman load` read.
# crane edits image configs only in a registry, so it serves an in-memory one
# on loopback for the duration of the build.
# Usage: hack/image.sh   (VERSION defaults to the chart's appVersion)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/hack/tools.sh" crane
crane="$root/.cache/bin/crane"

version=${VERSION:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$root/charts/runnerguard/Chart.yaml")}
ref="ghcr.io/runnerguard/runnerguard:$version"
out="$root/.cache/images/runnerguard.tar"
for c in runnerguard vitals; do
  [ -d "$root/cmd/$c" ] || { echo "hack/image.sh: cmd/$c does not exist yet" >&2; exit 1; }
done

# shellcheck source=hack/registry.sh
. "$root/hack/registry.sh"

rootfs="$work/rootfs"
mkdir -p "$rootfs/etc" "$rootfs/tmp"
chmod 1777 "$rootfs/tmp"
echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' > "$rootfs/etc/passwd"
echo 'nonroot:x:65532:' > "$rootfs/etc/group"
(cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$rootfs/" ./cmd/runnerguard ./cmd/vitals)
# Fixed owners and times: the same sources give the same layer digest.
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
  -C "$rootfs" -cf "$work/layer.tar" etc runnerguard tmp vitals

local_ref="127.0.0.1:$port/runnerguard/runnerguard:$version"

# crane logs every blob it moves: show its output only when it fails.
quiet() {
  local log
  log=$("$@" 2>&1) || { echo "$log" >&2; return 1; }
}

quiet "$crane" append --oci-empty-base --platform linux/amd64 -f "$work/layer.tar" -t "$local_ref"
mkdir -p "$(dirname "$out")"
quiet "$crane" mutate "$local_ref" --set-platform linux/amd64 --entrypoint /runnerguard --user 65532:65532 \
  --label "org.opencontainers.image.source=https://github.com/runnerguard/runnerguard" \
  --label "org.opencontainers.image.version=$version" \
  -t "$ref" -o "$out.tmp"
mv "$out.tmp" "$out"

# Check what was written, read back through the registry.
check_ref="127.0.0.1:$port/check:$version"
quiet "$crane" push "$out" "$check_ref"
config=$("$crane" config "$check_ref")
for want in '"Entrypoint":["/runnerguard"]' '"User":"65532:65532"' '"architecture":"amd64"' '"os":"linux"'; do
  [[ $config == *"$want"* ]] || { echo "hack/image.sh: image config lacks $want: $config" >&2; exit 1; }
done
listing=$("$crane" export "$check_ref" - | tar -tv)
files=$(awk '{print $NF}' <<< "$listing" | sed 's#/$##' | sort | tr '\n' ' ')
[ "$files" = "etc etc/group etc/passwd runnerguard tmp vitals " ] ||
  { echo "hack/image.sh: unexpected files in the image: $files" >&2; exit 1; }
grep -q '^drwxrwxrwt .* tmp/\{0,1\}$' <<< "$listing" ||
  { echo "hack/image.sh: /tmp is not world-writable with the sticky bit: $listing" >&2; exit 1; }
echo "$ref -> $out ($(du -h "$out" | cut -f1), digest $("$crane" digest "$check_ref"))"
