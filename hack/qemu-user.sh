#!/usr/bin/env bash
# Installs Debian's qemu user-mode emulator (qemu-user-static, and
# binfmt-support, which registers it with the kernel where binfmt_misc is
# writable) when missing, so the arm64 binaries run on this amd64 machine.
# The arm64 test calls qemu-aarch64-static by name, so it needs no binfmt
# registration (containers often cannot make one).
# Usage: hack/qemu-user.sh
set -euo pipefail
packages=(qemu-user-static binfmt-support)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "hack/qemu-user.sh: run as root to install ${missing[*]}" >&2; exit 1; }
  echo ">> installing Debian packages: ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v qemu-aarch64-static >/dev/null || { echo "hack/qemu-user.sh: no qemu-aarch64-static after install" >&2; exit 1; }
