#!/bin/sh
# /init of the vitals cgroup v2 test VM (see hack/qemu-v2.sh): a pod-like
# cgroup with a 50M memory.max and one container cgroup in it, the vitals
# sidecar watching the pod cgroup, dd OOM-killed in the container, then
# SIGTERM to the sidecar. Results go to the serial console between
# "=== BEGIN <name> ===" and "=== END <name> ===" lines.
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t cgroup2 cgroup2 /sys/fs/cgroup

CG=/sys/fs/cgroup
POD=$CG/pod
CTR=$POD/cri-containerd-4f1c0bd2e3a4b5c6d7e8f90123456789abcdef0123456789abcdef012345678a.scope
echo +memory > $CG/cgroup.subtree_control
mkdir $POD
echo +memory > $POD/cgroup.subtree_control
echo 50M > $POD/memory.max
mkdir $CTR

section() { echo "=== BEGIN $1 ==="; cat "$2"; echo; echo "=== END $1 ==="; }

/vitals --cgroup-root $CG --cgroup-path pod --interval 2s --out-dir /out \
	--termination-message-path /out/termination-log >/out/stdout 2>/out/stderr &
VITALS=$!
while [ ! -s /out/stdout ]; do usleep 10000; done

/probe oom $POD/memory.events >/out/oom-time &
PROBE=$!
sh -c "echo \$\$ > $CTR/cgroup.procs; exec dd if=/dev/zero of=/dev/null bs=100M count=1"
echo "allocator exit $?" >/out/allocator
wait $PROBE
sleep 1
grep VmRSS /proc/$VITALS/status >/out/rss
/probe term $VITALS >/out/term-ms
wait $VITALS
echo "vitals exit $?" >>/out/term-ms

for f in stdout stderr allocator oom-time rss term-ms memory.events memory.peak vitals.json termination-log; do
	section "$f" /out/$f
done
for f in memory.events memory.peak memory.current memory.max memory.pressure memory.stat; do
	section "pod/$f" $POD/$f
done
section uname /proc/version
poweroff -f
