#!/usr/bin/env bash
# Runs the vitals sidecar against a real cgroup v2 kernel: a Debian cloud
# kernel under qemu (software emulation, no KVM needed) with an initramfs of
# busybox-static, the static vitals binary, a timing probe and
# hack/qemu-v2-init.sh as /init. Installs qemu and busybox-static with apt
# when missing and caches the kernel under .cache/qemu/.
# Prints the path of the serial console log it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CACHE:-$PWD/.cache}/qemu
mkdir -p "$CACHE"

hack/debian.sh qemu-system-x86 busybox-static

# The newest signed cloud kernel the apt lists know.
kernel_pkg() {
	apt-cache search --names-only '^linux-image-[0-9.]+-[0-9]+-cloud-amd64$' | awk '{print $1}' | sort -V | tail -n1
}
pkg=${VITALS_KERNEL_PKG:-$(kernel_pkg)}
if [ -z "$pkg" ]; then
	hack/debian.sh --update
	pkg=$(kernel_pkg)
fi
kdir=$CACHE/$pkg
if [ ! -d "$kdir" ]; then
	(cd "$CACHE" && apt-get download -qq "$pkg" >&2)
	dpkg-deb -x "$CACHE/${pkg}"_*.deb "$kdir.tmp"
	mv "$kdir.tmp" "$kdir"
	rm -f "$CACHE/${pkg}"_*.deb
fi
vmlinuz=$(ls "$kdir"/boot/vmlinuz-*)

root=$CACHE/initramfs
rm -rf "$root"
mkdir -p "$root"/{bin,proc,sys,dev,out}
cp /bin/busybox "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$root/vitals" ./cmd/vitals
CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$root/probe" ./hack/qemu-v2-probe
install -m 0755 hack/qemu-v2-init.sh "$root/init"
(cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$CACHE/initrd.gz"

console=$CACHE/console.log
start=$(date +%s.%N)
timeout ${VITALS_QEMU_TIMEOUT:-360} qemu-system-x86_64 -m 512 -smp 2 -nographic -no-reboot \
	-kernel "$vmlinuz" -initrd "$CACHE/initrd.gz" \
	-append "console=ttyS0 quiet panic=-1 psi=1" >"$console" 2>&1 </dev/null
echo "booted $pkg, ran and powered off in $(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $start}") s" >&2
echo "$console"
