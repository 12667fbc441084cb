#!/usr/bin/env bash
# Installs the kubectl plugin from this checkout where PATH finds it (make
# plugin): kubectl-runnerguard, stamped as a release's is (hack/buildinfo.sh),
# and kubectl_complete-runnerguard, with which kubectl completes
# `kubectl runnerguard <TAB>` (hack/krew's script, as the release archives
# carry it). Says so when BINDIR is not on PATH.
# Usage: hack/plugin-install.sh BINDIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bindir=${1:?usage: hack/plugin-install.sh BINDIR}
# shellcheck source=hack/buildinfo.sh
. "$root/hack/buildinfo.sh"
mkdir -p "$bindir"
(cd "$root" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bindir/kubectl-runnerguard.tmp" ./cmd/runnerguard)
mv "$bindir/kubectl-runnerguard.tmp" "$bindir/kubectl-runnerguard"
install -m 0755 "$root/hack/krew/kubectl_complete-runnerguard" "$bindir/kubectl_complete-runnerguard"
echo "installed kubectl-runnerguard $version ($commit) and kubectl_complete-runnerguard in $bindir"
case ":$PATH:" in
  *":$bindir:"*) ;;
  *) echo "note: $bindir is not on your PATH; add it, or run make plugin BINDIR=<a directory on PATH>" >&2 ;;
esac
