//go:build cgroupv1

package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/vitals/record"
)

const (
	memHier = "/sys/fs/cgroup/memory"
	limit   = 64 << 20
)

// arrival is a line of the sidecar's stdout and when it came.
type arrival struct {
	line record.Line
	at   time.Time
}

// TestOOMKillV1 runs the built sidecar on a real v1 memory cgroup shaped
// like a pod (a limited pod cgroup, a container cgroup in it), has the
// kernel OOM-kill dd in the container, and checks the evidence on stdout,
// in the shared folder and in the termination message.
func TestOOMKillV1(t *testing.T) {
	bin := builtOnV1(t)

	name := "runnerguard-test-" + randomHex(4)
	ctrID := randomHex(32)
	pod, ctr := filepath.Join(memHier, name), filepath.Join(memHier, name, ctrID)
	require.NoError(t, os.Mkdir(pod, 0o755))
	t.Cleanup(func() { removeCgroup(t, pod, ctr) })
	require.NoError(t, os.Mkdir(ctr, 0o755))
	require.NoError(t, os.WriteFile(pod+"/memory.limit_in_bytes", []byte(fmt.Sprint(limit)), 0o644))
	_ = os.WriteFile(ctr+"/memory.swappiness", []byte("0"), 0o644) // swap would delay the OOM kill

	dir := t.TempDir()
	shared, termLog := filepath.Join(dir, "shared"), filepath.Join(dir, "termination-log")
	require.NoError(t, os.Mkdir(shared, 0o755))
	sidecar := exec.Command(bin, "--cgroup-root=/sys/fs/cgroup", "--cgroup-path="+name, "--interval=2s",
		"--out-dir="+shared, "--termination-message-path="+termLog)
	sidecar.Env = append(os.Environ(), "POD_NAME=runner-v1", "POD_NAMESPACE=ci", "NODE_NAME=node-1")
	var stderr bytes.Buffer
	sidecar.Stderr = &stderr
	stdout, err := sidecar.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, sidecar.Start())
	t.Cleanup(func() { _ = sidecar.Process.Kill() })
	lines := make(chan arrival, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l record.Line
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				lines <- arrival{l, time.Now()}
			}
		}
		close(lines)
	}()
	first := next(t, lines, 5*time.Second)
	require.Equal(t, record.TriggerStart, first.line.Trigger)

	// The reference time of the kill: a 1 ms poll of the victim's counter,
	// independent of the sidecar's own 250 ms poll.
	killedAt := make(chan time.Time, 1)
	go func() {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			if b, _ := os.ReadFile(ctr + "/memory.oom_control"); bytes.Contains(b, []byte("\noom_kill ")) && !bytes.Contains(b, []byte("\noom_kill 0")) {
				killedAt <- time.Now()
				return
			}
		}
	}()
	dd := exec.Command("sh", "-c", "echo $$ > "+ctr+"/cgroup.procs && exec dd if=/dev/zero of=/dev/null bs=200M count=1")
	err = dd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "the kernel OOM-kills dd")
	kill := <-killedAt

	var oom arrival
	for oom.line.Trigger != record.TriggerOOM {
		oom = next(t, lines, 2*time.Second)
	}
	delay := oom.at.Sub(kill)
	t.Logf("OOM kill to line: %v", delay)
	t.Logf("oom line: %s", mustJSON(oom.line))
	assert.Less(t, delay, 500*time.Millisecond, "the OOM kill is on record within a fraction of a second")
	assert.Equal(t, uint64(1), oom.line.Pod.Events.OOMKill, "the pod counts its container's kill")
	// As root on a writable mount the kernel's OOM notification is
	// registered, and the lines say so.
	assert.Equal(t, "notified", oom.line.OOMWatch)
	assert.Positive(t, oom.line.Pod.Events.OOM, "the OOM the kernel notified")
	assert.Equal(t, uint64(1), oom.line.Containers[ctrID].Events.OOMKill)
	assert.Equal(t, uint64(limit), *oom.line.Pod.Limit)
	peak := *oom.line.Pod.Peak
	assert.InDelta(t, limit, peak, limit/10, "the peak reaches the limit")

	// The runtime removes an ended container's cgroup, and with it v1's
	// only count of the kill: the pod's count must stay.
	require.NoError(t, os.Remove(ctr))
	var later arrival
	for later.line.Trigger != record.TriggerInterval {
		later = next(t, lines, 3*time.Second)
	}
	assert.NotContains(t, later.line.Containers, ctrID)
	assert.Equal(t, uint64(1), later.line.Pod.Events.OOMKill, "the kill stays counted after the container cgroup is gone")

	proc, err := procfs.NewProc(sidecar.Process.Pid)
	require.NoError(t, err)
	status, err := proc.NewStatus()
	require.NoError(t, err)
	t.Logf("sidecar RSS: %.1f MiB", float64(status.VmRSS)/(1<<20))
	assert.Less(t, status.VmRSS, uint64(32<<20))
	cpu0 := cpuTime(t, sidecar.Process.Pid)
	time.Sleep(4 * time.Second)
	t.Logf("sidecar CPU while idle (250 ms OOM poll, 2 s interval): %.3f ms/s",
		float64(cpuTime(t, sidecar.Process.Pid)-cpu0)/1e6/4)

	start := time.Now()
	require.NoError(t, sidecar.Process.Signal(syscall.SIGTERM))
	var final arrival
	for l := range lines {
		final = l
	}
	require.NoError(t, sidecar.Wait(), stderr.String())
	stopped := time.Since(start)
	t.Logf("SIGTERM to exit: %v", stopped)
	// Promptly, not at its next sample or the kubelet's kill: well inside
	// the default grace period of a pod deletion, with room for a loaded
	// machine (the measured time is in docs/performance).
	assert.Less(t, stopped, 10*time.Second)
	assert.Equal(t, record.TriggerFinal, final.line.Trigger)

	msg, err := os.ReadFile(termLog)
	require.NoError(t, err)
	t.Logf("termination message: %s", msg)
	f, err := record.ParseFinal(string(msg))
	require.NoError(t, err)
	// The final reading keeps, beyond the last line, when the kill was
	// first seen and each container cgroup's own memory over the pod's life.
	require.NotNil(t, f.OOMKillAt, "when the OOM kill was first seen")
	assert.False(t, f.OOMKillAt.After(f.Time))
	killed := 0
	for _, c := range f.Containers {
		if c.OOMKill > 0 {
			killed++
			assert.NotNil(t, c.OOMKillAt)
		}
	}
	assert.Equal(t, 1, killed, "the killed container's own count")
	lifelong := f
	lifelong.OOMKillAt, lifelong.Containers = nil, nil
	assert.Equal(t, final.line.Final(), lifelong)
	assert.Equal(t, uint64(1), f.OOMKill)
	assert.Equal(t, "notified", f.OOMWatch)
	assert.Equal(t, peak, *f.Peak)

	events, err := os.ReadFile(shared + "/memory.events")
	require.NoError(t, err)
	assert.Contains(t, string(events), "\noom_kill 1\n")
	peakFile, err := os.ReadFile(shared + "/memory.peak")
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("%d\n", peak), string(peakFile))
	snapshot, err := os.ReadFile(shared + "/vitals.json")
	require.NoError(t, err)
	assert.JSONEq(t, mustJSON(final.line), string(snapshot))
	assert.Contains(t, stderr.String(), `"pod":"runner-v1","namespace":"ci","node":"node-1"`)
}

// cpuTime is the CPU time of all of pid's threads in ns: schedstat counts
// in ns where stat counts 10 ms ticks, but only per thread.
func cpuTime(t *testing.T, pid int) uint64 {
	threads, err := procfs.AllThreads(pid)
	require.NoError(t, err)
	var ns uint64
	for _, th := range threads {
		if s, err := th.Schedstat(); err == nil {
			ns += s.RunningNanoseconds
		}
	}
	return ns
}

func next(t *testing.T, lines <-chan arrival, within time.Duration) arrival {
	t.Helper()
	select {
	case a, ok := <-lines:
		require.True(t, ok, "the sidecar's stdout ended")
		return a
	case <-time.After(within):
		require.FailNow(t, "no line from the sidecar within "+within.String())
		return arrival{}
	}
}

// removeCgroup kills what is left in the test cgroups and removes them.
func removeCgroup(t *testing.T, dirs ...string) {
	for i := len(dirs) - 1; i >= 0; i-- {
		procs, _ := os.ReadFile(dirs[i] + "/cgroup.procs")
		for _, pid := range strings.Fields(string(procs)) {
			var p int
			fmt.Sscan(pid, &p)
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		var err error
		for range 50 {
			if err = os.Remove(dirs[i]); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove test cgroup: %v", err)
		}
	}
}

// builtOnV1 skips unless this is root on a cgroup v1 memory hierarchy, and
// builds the sidecar as the image does.
func builtOnV1(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make memory cgroups")
	}
	if _, err := os.Stat(memHier + "/memory.limit_in_bytes"); err != nil {
		t.Skip("no cgroup v1 memory hierarchy at " + memHier)
	}
	bin := filepath.Join(t.TempDir(), "vitals")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	return bin
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
