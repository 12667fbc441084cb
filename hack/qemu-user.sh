#!/usr/bin/env bash
# Installs Debian's qemu user-mode emulator (qemu-user-static, and
# binfmt-support, which registers it with the kernel where binfmt_misc is
# writable) when missing, so the arm64 binaries run on this amd64 machine.
# The arm64 test calls qemu-aarch64-static by name, so it needs no binfmt
# registration (containers often cannot make one).
# Usage: hack/qemu-user.sh
set -euo pipefail
"$(dirname "$0")/debian.sh" qemu-user-static binfmt-support
command -v qemu-aarch64-static >/dev/null || { echo "hack/qemu-user.sh: no qemu-aarch64-static after install" >&2; exit 1; }
