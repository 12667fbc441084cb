#!/usr/bin/env bash
# Installs the Debian packages named that are not installed yet, one apt run
# at a time on the machine: make test's two lanes both install packages
# (containerd for the node, qemu for the vitals), and a second apt-get
# fails at once on the lock the first holds. --update refreshes the package
# lists even when nothing is missing (hack/qemu-v2.sh reads them).
# Usage: hack/debian.sh [--update] [package ...]
set -euo pipefail
update=
if [ "${1:-}" = --update ]; then
  update=1
  shift
fi
missing() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
  done
}
[ -n "$update" ] || [ -n "$(missing "$@")" ] || exit 0
[ "$(id -u)" = 0 ] || { echo "hack/debian.sh: run as root to install: $(missing "$@" | tr '\n' ' ')" >&2; exit 1; }
exec 9> /run/lock/runnerguard-apt.lock
flock 9
# Another lane may have installed them while this one waited.
mapfile -t need < <(missing "$@")
[ -n "$update" ] || [ ${#need[@]} -gt 0 ] || exit 0
# The lock timeout covers apt run by anything else on the machine.
apt=(apt-get -qq -o DPkg::Lock::Timeout=600)
"${apt[@]}" update >&2
if [ ${#need[@]} -gt 0 ]; then
  echo ">> installing Debian packages: ${need[*]}" >&2
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends "${need[@]}" >/dev/null
fi
