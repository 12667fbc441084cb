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

# A stall at memory.high, no kill: a second pod cgroup whose two container
# cgroups have a 30M memory.high and no memory.max. One touches it once
# (a 31M buffer); the other allocates 40M buffers in a loop, which the
# kernel throttles without end, until it is killed. The sidecar's CPU and
# memory are read over the stall.
SPOD=$CG/stallpod
BRIEF=$SPOD/cri-containerd-b1ef0000000000000000000000000000000000000000000000000000000000b1.scope
HELD=$SPOD/cri-containerd-4e1d0000000000000000000000000000000000000000000000000000000000e1.scope
mkdir $SPOD
echo +memory > $SPOD/cgroup.subtree_control
mkdir $BRIEF $HELD
echo 30M > $BRIEF/memory.high
echo 30M > $HELD/memory.high
ip link set lo up
mkdir /out2
/vitals --cgroup-root $CG --cgroup-path stallpod --interval 2s --out-dir /out2 \
	--termination-message-path /out2/termination-log --probe-addr 127.0.0.1:9798 >/out2/stdout 2>/out2/stderr &
SV=$!
while [ ! -s /out2/stdout ]; do usleep 10000; done
/probe now - >/out2/brief-start
sh -c "echo \$\$ > $BRIEF/cgroup.procs; exec dd if=/dev/zero of=/dev/null bs=31M count=1" 2>/dev/null
/probe now - >/out2/brief-end
sleep 8
cut -d' ' -f14,15 /proc/$SV/stat >/out2/cpu-before
/probe now - >/out2/held-start
sh -c "echo \$\$ > $HELD/cgroup.procs; while true; do dd if=/dev/zero of=/dev/null bs=40M count=1 2>/dev/null; done" &
n=0
while ! grep -q '"trigger":"stall"' /out2/stdout && [ $n -lt 240 ]; do sleep 1; n=$((n+1)); done
/probe now - >/out2/told
wget -q -O - http://127.0.0.1:9798/ready >/out2/ready 2>&1; echo "wget exit $?" >>/out2/ready
sleep 20
cut -d' ' -f14,15 /proc/$SV/stat >/out2/cpu-after
grep -E 'VmRSS|VmHWM' /proc/$SV/status >/out2/rss
echo 1 > $HELD/cgroup.kill
# A stall ends once its condition has failed for 10 s (a dip is not an end).
sleep 14
wget -q -O - http://127.0.0.1:9798/ready >/out2/ready-after 2>&1; echo "wget exit $?" >>/out2/ready-after
/probe term $SV >/dev/null
wait $SV
for f in stdout stderr brief-start brief-end held-start told ready ready-after cpu-before cpu-after rss termination-log; do
	section "stall/$f" /out2/$f
done
for f in memory.events memory.pressure; do
	section "stall/held/$f" $HELD/$f
done
poweroff -f
