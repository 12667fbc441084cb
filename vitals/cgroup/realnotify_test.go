//go:build cgroupv1

package cgroup

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestNotifiedKillV1 has the kernel OOM-kill a process in a container
// cgroup on this machine's v1 memory hierarchy and removes that cgroup the
// moment the process is reaped, sooner than a container runtime would. The
// poll is too slow to ever read the counter: only the kernel's OOM
// notification can count the kill, and it must, every time.
func TestNotifiedKillV1(t *testing.T) {
	hier := "/sys/fs/cgroup/memory"
	if os.Geteuid() != 0 {
		t.Skip("needs root to make memory cgroups")
	}
	if _, err := os.Stat(hier + "/memory.limit_in_bytes"); err != nil {
		t.Skip("no cgroup v1 memory hierarchy")
	}
	for run := range 10 {
		t.Run(fmt.Sprint("run ", run+1), func(t *testing.T) {
			name := "runnerguard-notify-" + hexID(4)
			id := hexID(32)
			pod, ctr := filepath.Join(hier, name), filepath.Join(hier, name, id)
			require.NoError(t, os.Mkdir(pod, 0o755))
			t.Cleanup(func() { rmdirs(t, ctr, pod) })
			p := NewPod(Options{Root: "/sys/fs/cgroup", Path: name, Poll: time.Hour})
			require.Empty(t, p.Read().Missing)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wake := p.Watch(ctx)
			<-wake
			// The container cgroup appears after the watch began, as a
			// runner's does after its sidecar's.
			require.NoError(t, os.Mkdir(ctr, 0o755))
			require.NoError(t, os.WriteFile(ctr+"/memory.limit_in_bytes", []byte("33554432"), 0o644))
			_ = os.WriteFile(ctr+"/memory.swappiness", []byte("0"), 0o644)
			require.Eventually(t, func() bool { return p.Read().OOMWatch == WatchNotified },
				30*time.Second, 10*time.Millisecond, "the notification registered on the new container cgroup")

			dd := exec.Command("sh", "-c", "echo $$ > "+ctr+"/cgroup.procs && exec dd if=/dev/zero of=/dev/null bs=100M count=1")
			err := dd.Run()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "the kernel OOM-kills dd")
			rmdirs(t, ctr)

			var l = p.Read()
			require.Eventually(t, func() bool {
				l = p.Read()
				return l.Pod.Events != nil && l.Pod.Events.OOMKill > 0
			}, 30*time.Second, 10*time.Millisecond, "the kill counted though its cgroup went at once")
			assert.Equal(t, uint64(1), l.Pod.Events.OOMKill)
			assert.Equal(t, map[string]uint64{id: 1}, l.GoneOOMKills)
			assert.Positive(t, l.Pod.Events.OOM, "the OOM the kernel notified")
			assert.Equal(t, WatchNotified, l.OOMWatch)
		})
	}
}

func hexID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// rmdirs removes test cgroups, killing what is left in them.
func rmdirs(t *testing.T, dirs ...string) {
	for _, d := range dirs {
		var err error
		for range 100 {
			if err = os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if procs, _ := os.ReadFile(d + "/cgroup.procs"); len(procs) > 0 {
				var pid int
				fmt.Sscan(string(procs), &pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("remove test cgroup: %v", err)
		}
	}
}

// TestPolledWhereReadOnlyV1: on a read-only mount of the same hierarchy,
// as the sidecar has by default, no notification can be registered; the
// watch polls and the lines say so.
func TestPolledWhereReadOnlyV1(t *testing.T) {
	hier := "/sys/fs/cgroup/memory"
	if os.Geteuid() != 0 {
		t.Skip("needs root to make memory cgroups and mounts")
	}
	if _, err := os.Stat(hier + "/memory.limit_in_bytes"); err != nil {
		t.Skip("no cgroup v1 memory hierarchy")
	}
	root := t.TempDir()
	require.NoError(t, os.Mkdir(root+"/memory", 0o755))
	require.NoError(t, unix.Mount(hier, root+"/memory", "", unix.MS_BIND, ""))
	t.Cleanup(func() { _ = unix.Unmount(root+"/memory", unix.MNT_DETACH) })
	require.NoError(t, unix.Mount("", root+"/memory", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""))

	name := "runnerguard-notify-" + hexID(4)
	pod, ctr := filepath.Join(hier, name), filepath.Join(hier, name, hexID(32))
	require.NoError(t, os.Mkdir(pod, 0o755))
	t.Cleanup(func() { rmdirs(t, ctr, pod) })
	require.NoError(t, os.Mkdir(ctr, 0o755))
	p := NewPod(Options{Root: root, Path: name, Poll: 10 * time.Millisecond})
	require.Empty(t, p.Read().Missing)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	<-p.Watch(ctx)
	assert.Equal(t, WatchPolled, p.Read().OOMWatch)
}
