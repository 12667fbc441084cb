//go:build cgroupv1

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/vitals"
	"github.com/runnerguard/runnerguard/vitals/record"
)

// The sidecar's requests and CPU limit (the chart's default
// inject.vitals.resources), in milliseconds of CPU a second and bytes.
const (
	requestCPUms  = 5
	limitCPUms    = 50
	requestMemory = 16 << 20
)

// TestCostUnderV1StallAndOOMStormV1 runs the built sidecar, its OOM
// notification registered, on a real v1 pod cgroup through the two things
// that make it work hardest on v1: a container held under OOM (its OOM
// killer off: the v1 stall), then a container OOM-killed over and over.
// Its memory stays within its request throughout. The storm costs at most
// a line each vitals.DefaultOOMGap besides the interval's (each line reads
// every cgroup of the pod), whatever the kernel's pace of kills, and it
// counts every kill. Its CPU in each is reported against its request and
// limit, for make bench, not asserted: how many milliseconds the same work
// takes is the machine's, and the kernel's pace of kills in the storm
// grows with the machine's speed.
func TestCostUnderV1StallAndOOMStormV1(t *testing.T) {
	bin := builtOnV1(t)

	name := "runnerguard-cost-" + randomHex(4)
	stuckID, stormID := randomHex(32), randomHex(32)
	pod := filepath.Join(memHier, name)
	stuck, storm := filepath.Join(pod, stuckID), filepath.Join(pod, stormID)
	require.NoError(t, os.Mkdir(pod, 0o755))
	t.Cleanup(func() { removeCgroup(t, pod, stuck, storm) })
	for _, d := range []string{stuck, storm} {
		require.NoError(t, os.Mkdir(d, 0o755))
		require.NoError(t, os.WriteFile(d+"/memory.limit_in_bytes", []byte("33554432"), 0o644))
		_ = os.WriteFile(d+"/memory.swappiness", []byte("0"), 0o644)
	}
	require.NoError(t, os.WriteFile(stuck+"/memory.oom_control", []byte("1"), 0o644))

	sidecar := exec.Command(bin, "--cgroup-root=/sys/fs/cgroup", "--cgroup-path="+name, "--interval=1s",
		"--termination-message-path="+filepath.Join(t.TempDir(), "termination-log"))
	stdout, err := sidecar.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, sidecar.Start())
	t.Cleanup(func() { _ = sidecar.Process.Kill() })
	lines := make(chan record.Line, 1000)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l record.Line
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines <- l
			}
		}
		close(lines)
	}()
	waitLine(t, lines, func(l record.Line) bool { return l.OOMWatch == "notified" })

	// The stall: dd waits under OOM for as long as the cgroup's OOM killer
	// is off.
	hold := exec.Command("sh", "-c", "echo $$ > "+stuck+"/cgroup.procs && exec dd if=/dev/zero of=/dev/null bs=100M count=1")
	require.NoError(t, hold.Start())
	t.Cleanup(func() { _ = hold.Process.Kill(); _ = hold.Wait() })
	waitLine(t, lines, func(l record.Line) bool { c := l.Containers[stuckID]; return c.UnderOOM != nil && *c.UnderOOM })
	measure(t, sidecar.Process.Pid, "a container held under OOM")

	// The storm: dd OOM-killed again and again while the stall lasts.
	loop := exec.Command("sh", "-c", "echo $$ > "+storm+"/cgroup.procs && while :; do dd if=/dev/zero of=/dev/null bs=100M count=1 2>/dev/null; done")
	require.NoError(t, loop.Start())
	t.Cleanup(func() { _ = loop.Process.Kill(); _ = loop.Wait() })
	n0, at0 := len(lines), time.Now()
	measure(t, sidecar.Process.Pid, "a container OOM-killed over and over, besides")
	span := time.Since(at0)
	bound := int(span/vitals.DefaultOOMGap) + int(span/time.Second) + 2
	t.Logf("lines over the storm's span (%v): %d, at most %d", span.Round(time.Millisecond), len(lines)-n0, bound)
	assert.LessOrEqual(t, len(lines)-n0, bound, "at most an OOM line a gap and an interval line a second")
	require.NoError(t, loop.Process.Kill())
	_ = loop.Wait()

	b, err := os.ReadFile(storm + "/memory.oom_control")
	require.NoError(t, err)
	var kills uint64
	for f := range strings.Lines(string(b)) {
		fmt.Sscanf(f, "oom_kill %d", &kills)
	}
	require.Positive(t, kills)
	// The dd running when its loop was killed may be killed once more, and
	// a line counts every kill of its gap: at least those read above.
	l := waitLine(t, lines, func(l record.Line) bool { return l.Containers[stormID].Events.OOMKill >= kills })
	t.Logf("kills in the storm: %d, counted: %d", kills, l.Containers[stormID].Events.OOMKill)
}

// measure reports the sidecar's CPU over a few seconds, and asserts its
// memory within its request.
func measure(t *testing.T, pid int, what string) {
	t.Helper()
	const span = 3 * time.Second
	cpu0, at0 := cpuTime(t, pid), time.Now()
	time.Sleep(span) // a span to average the CPU over, not a wait for a condition
	msPerS := float64(cpuTime(t, pid)-cpu0) / 1e6 / time.Since(at0).Seconds()
	proc, err := procfs.NewProc(pid)
	require.NoError(t, err)
	st, err := proc.NewStatus()
	require.NoError(t, err)
	t.Logf("%s: sidecar CPU %.2f ms/s (request %d, limit %d), RSS %.1f MiB (request %d MiB)",
		what, msPerS, requestCPUms, limitCPUms, float64(st.VmRSS)/(1<<20), requestMemory>>20)
	assert.Less(t, st.VmRSS, uint64(requestMemory), "memory within the request")
}

func waitLine(t *testing.T, lines <-chan record.Line, cond func(record.Line) bool) record.Line {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the sidecar's stdout ended")
			if cond(l) {
				return l
			}
		case <-timeout:
			require.FailNow(t, "no such line from the sidecar")
		}
	}
}
