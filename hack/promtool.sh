#!/usr/bin/env bash
# Installs promtool, pinned, into .cache/bin, built from the Go module proxy
# (github.com/prometheus/prometheus/cmd/promtool). make alerts-test runs the
# chart's alert rules through its `test rules`. Built once into
# .cache/tools/promtool-<version>, so a warm run builds nothing and a version
# bump here rebuilds only promtool.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.cache/bin"
tools="$root/.cache/tools"
mkdir -p "$bin" "$tools"

# Prometheus tags its Go module as v0.<minor>.<patch> for release
# v3.<minor>.<patch>; this is Prometheus 3.16.0, whose go.mod has no replace
# directives, so `go install pkg@version` accepts it.
version=v0.316.0
release=3.16.0

dir="$tools/promtool-$version"
if [ ! -x "$dir/promtool" ]; then
  echo ">> building promtool $version from the Go module proxy (cold: several minutes on 2 cores)" >&2
  start=$SECONDS
  rm -rf "$dir.tmp"
  GOBIN="$dir.tmp" CGO_ENABLED=0 GOFLAGS= go install -trimpath \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=$release" \
    "github.com/prometheus/prometheus/cmd/promtool@$version"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
  echo ">> built promtool in $((SECONDS - start))s" >&2
fi
ln -sfn "$dir/promtool" "$bin/promtool"
