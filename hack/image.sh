#!/usr/bin/env bash
# Builds the image the Dockerfile describes, for linux/amd64 and linux/arm64
# as one OCI index, without a Docker engine: the static binaries
# /runnerguard and /vitals plus the same /etc/passwd, /etc/group and /tmp,
# as one tar layer on an empty base, entrypoint /runnerguard, user 65532.
#
# Reproducible: the same commit gives the same index digest on any machine
# with the same Go. Binaries are built with -trimpath and an empty build id;
# the layer is a sorted tar with fixed owners and mtimes; the config is
# written whole here, its created time the commit's time (SOURCE_DATE_EPOCH
# overrides it). Version, commit and date are stamped into the binaries
# (internal/version) as hack/buildinfo.sh says, alike in the kubectl
# plugin's archives (hack/plugin.sh).
#
# crane edits images only in a registry, so the build happens in an
# in-memory one on loopback. The result is kept as an OCI layout in
# .cache/images/runnerguard/ (the index digest in runnerguard.digest, its
# platforms in runnerguard.platforms) and copied to each REF given.
#
# IMAGE_PLATFORMS="amd64" builds only those of the two (a release to this
# machine's node cluster, for the demo and the node suites: the node runs
# one platform, and a cross-compile of the module graph is the dearest part
# of a cold build; `make image` and the release workflow build both).
# IMAGE_OUT puts the result elsewhere than .cache/images, so a release
# never writes the digest of an image built beside it.
# Usage: hack/image.sh [REF ...]   (VERSION defaults to the chart's appVersion)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/hack/tools.sh" crane
crane="$root/.cache/bin/crane"

# shellcheck source=hack/buildinfo.sh
. "$root/hack/buildinfo.sh"
out=${IMAGE_OUT:-$root/.cache/images}
read -r -a platforms <<< "${IMAGE_PLATFORMS:-amd64 arm64}"
for arch in "${platforms[@]}"; do
  case "$arch" in amd64 | arm64) ;; *) echo "hack/image.sh: IMAGE_PLATFORMS names $arch; want amd64, arm64 or both" >&2; exit 1 ;; esac
done

# shellcheck source=hack/registry.sh
. "$root/hack/registry.sh"

# crane logs every blob it moves: show its output only when it fails.
quiet() {
  local log
  log=$("$@" 2>&1) || { echo "$log" >&2; return 1; }
}

local_ref="127.0.0.1:$port/runnerguard:$version"
manifests=()
for arch in "${platforms[@]}"; do
  rootfs="$work/$arch"
  mkdir -p "$rootfs/etc" "$rootfs/tmp"
  chmod 1777 "$rootfs/tmp"
  echo 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' > "$rootfs/etc/passwd"
  echo 'nonroot:x:65532:' > "$rootfs/etc/group"
  (cd "$root" && CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" \
    -o "$rootfs/" ./cmd/runnerguard ./cmd/vitals)
  chmod 0755 "$rootfs/runnerguard" "$rootfs/vitals"
  chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
    -C "$rootfs" -cf "$work/$arch.tar" etc runnerguard tmp vitals
  quiet "$crane" append --oci-empty-base -f "$work/$arch.tar" -t "$local_ref-$arch"
  # The whole config, so nothing in it depends on the build machine or time.
  diff_id=$(sha256sum "$work/$arch.tar" | cut -d' ' -f1)
  cat > "$work/$arch.json" <<JSON
{"architecture":"$arch","os":"linux","created":"$date",
 "config":{"User":"65532:65532","Entrypoint":["/runnerguard"],"Labels":{
  "org.opencontainers.image.source":"https://github.com/runnerguard/runnerguard",
  "org.opencontainers.image.version":"$version","org.opencontainers.image.revision":"$commit",
  "org.opencontainers.image.created":"$date"}},
 "rootfs":{"type":"layers","diff_ids":["sha256:$diff_id"]},
 "history":[{"created":"$date","created_by":"hack/image.sh"}]}
JSON
  quiet "$crane" edit config "$local_ref-$arch" -t "$local_ref-$arch" < "$work/$arch.json"
  manifests+=(-m "$local_ref-$arch")
done
quiet "$crane" index append "${manifests[@]}" -t "$local_ref"
digest=$("$crane" digest "$local_ref")

# Check what was written, read back through the registry: both platforms
# in the index, each with its config and the same files, the binaries
# built for it (ELF e_machine: 0x3e x86-64, 0xb7 aarch64).
fail() { echo "hack/image.sh: $*" >&2; exit 1; }
index=$("$crane" manifest "$local_ref")
listed=$(grep -o '"architecture":"[a-z0-9]*","os":"linux"' <<< "$index" | cut -d'"' -f4 | sort | tr '\n' ' ')
want=$(printf '%s\n' "${platforms[@]}" | sort -u | tr '\n' ' ')
[ "$listed" = "$want" ] || fail "the index lists platforms '$listed', want '$want': $index"
declare -A machine=([amd64]=3e00 [arm64]=b700)
for arch in "${platforms[@]}"; do
  config=$("$crane" config --platform "linux/$arch" "$local_ref")
  for want in '"Entrypoint":["/runnerguard"]' '"User":"65532:65532"' "\"architecture\":\"$arch\"" '"os":"linux"' "\"created\":\"$date\""; do
    [[ $config == *"$want"* ]] || fail "linux/$arch config lacks $want: $config"
  done
  mkdir -p "$work/export-$arch"
  "$crane" export --platform "linux/$arch" "$local_ref" - > "$work/export-$arch.tar"
  listing=$(tar -tvf "$work/export-$arch.tar")
  files=$(awk '{print $NF}' <<< "$listing" | sed 's#/$##' | sort | tr '\n' ' ')
  [ "$files" = "etc etc/group etc/passwd runnerguard tmp vitals " ] || fail "unexpected files in linux/$arch: $files"
  grep -q '^drwxrwxrwt .* tmp/\{0,1\}$' <<< "$listing" || fail "/tmp is not world-writable with the sticky bit: $listing"
  tar -xf "$work/export-$arch.tar" -C "$work/export-$arch" runnerguard vitals
  for b in runnerguard vitals; do
    got=$(od -An -tx1 -j18 -N2 "$work/export-$arch/$b" | tr -d ' \n')
    [ "$got" = "${machine[$arch]}" ] || fail "linux/$arch /$b is built for ELF machine $got"
  done
done

rm -rf "$out/runnerguard.tmp"
quiet "$crane" pull --format=oci "$local_ref" "$out/runnerguard.tmp"
rm -rf "$out/runnerguard" && mv "$out/runnerguard.tmp" "$out/runnerguard"
echo "$digest" > "$out/runnerguard.digest"
printf 'linux/%s, ' "${platforms[@]}" | sed 's/, $//' > "$out/runnerguard.platforms"
for ref in "$@"; do
  quiet "$crane" copy "$local_ref" "$ref"
  [ "$("$crane" digest "$ref")" = "$digest" ] || fail "$ref does not have digest $digest after the copy"
  echo "pushed $ref@$digest" >&2
done
echo "runnerguard $version ($(cat "$out/runnerguard.platforms"); commit $commit, created $date): index $digest"
