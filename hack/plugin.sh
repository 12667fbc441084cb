#!/usr/bin/env bash
# Builds the kubectl plugin's release archives for every platform the krew
# manifest template hack/krew/runnerguard.yaml names in its URIs: the
# template is the one list, so it and the release cannot drift apart (and
# e2e/krew renders it against what this builds). Each
# kubectl-runnerguard_<os>_<arch>.tar.gz holds cmd/runnerguard built as
# kubectl-runnerguard, kubectl_complete-runnerguard (hack/krew's script that
# lets kubectl complete `kubectl runnerguard <TAB>`) and LICENSE when the
# repository has one;
# kubectl-runnerguard_checksums.txt lists their sha256 as sha256sum -c reads
# it.
#
# Reproducible like hack/image.sh: the binaries are stamped and built as
# hack/buildinfo.sh says; the tar is sorted, with fixed owners and modes and
# the commit's time; gzip stores no name or time. The same commit gives the
# same bytes with the same Go, tar and gzip.
# Usage: hack/plugin.sh [OUTDIR]   (default .cache/plugin; VERSION defaults
# to the chart's appVersion; PLUGIN_PLATFORMS="linux_amd64 ..." builds only
# those of the template's platforms, as `make test` does for this machine's:
# a cold cross-compile of the module graph for each platform is the
# slowest part of a cold `make test`)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "hack/plugin.sh: $*" >&2; exit 1; }
out=${1:-$root/.cache/plugin}
template="$root/hack/krew/runnerguard.yaml"
# shellcheck source=hack/buildinfo.sh
. "$root/hack/buildinfo.sh"

mapfile -t archives < <(grep -o 'kubectl-runnerguard_[a-z0-9]*_[a-z0-9]*\.tar\.gz' "$template" | sort -u)
[ "${#archives[@]}" -gt 0 ] || fail "no kubectl-runnerguard_<os>_<arch>.tar.gz URI in $template"
if [ -n "${PLUGIN_PLATFORMS:-}" ]; then
  wanted=()
  for platform in $PLUGIN_PLATFORMS; do
    archive="kubectl-runnerguard_$platform.tar.gz"
    printf '%s\n' "${archives[@]}" | grep -qxF "$archive" ||
      fail "PLUGIN_PLATFORMS names $platform, which $template does not list"
    wanted+=("$archive")
  done
  archives=("${wanted[@]}")
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
for archive in "${archives[@]}"; do
  platform=${archive#kubectl-runnerguard_}
  platform=${platform%.tar.gz}
  os=${platform%_*} arch=${platform#*_}
  dir="$work/$platform"
  mkdir -p "$dir"
  (cd "$root" && CGO_ENABLED=0 GOOS=$os GOARCH=$arch go build -trimpath -ldflags "$ldflags" \
    -o "$dir/kubectl-runnerguard" ./cmd/runnerguard)
  chmod 0755 "$dir/kubectl-runnerguard"
  install -m 0755 "$root/hack/krew/kubectl_complete-runnerguard" "$dir/kubectl_complete-runnerguard"
  files=(kubectl-runnerguard kubectl_complete-runnerguard)
  if [ -f "$root/LICENSE" ]; then
    install -m 0644 "$root/LICENSE" "$dir/LICENSE"
    files+=(LICENSE)
  fi
  tar --format=ustar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    -C "$dir" -cf - "${files[@]}" | gzip -n -9 > "$out/$archive.tmp"
  mv "$out/$archive.tmp" "$out/$archive"
done
(cd "$out" && sha256sum "${archives[@]}") > "$out/kubectl-runnerguard_checksums.txt"
echo "kubectl-runnerguard $version (commit $commit, built $date): ${archives[*]} and kubectl-runnerguard_checksums.txt in $out"
