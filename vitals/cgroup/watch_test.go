package cgroup

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// woken reports whether ch receives within d.
func woken(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

func TestWatch(t *testing.T) {
	v2Pod := "kubepods/burstable/pod" + podUID
	v1Pod := "memory/kubepods/burstable/pod" + podUID
	cases := []struct {
		name   string
		tree   string
		file   string // rewritten with change while watched
		change string
		wake   bool
	}{
		{name: "v2 wakes at once when memory.events counts another OOM kill", tree: "v2-cgroupfs",
			file: v2Pod + "/memory.events", change: "low 0\nhigh 0\nmax 36\noom 2\noom_kill 2\noom_group_kill 0\n", wake: true},
		{name: "v2 stays asleep when memory.events counts only reclaim at the limit", tree: "v2-cgroupfs",
			file: v2Pod + "/memory.events", change: "low 0\nhigh 0\nmax 99\noom 1\noom_kill 1\noom_group_kill 0\n"},
		{name: "v1 wakes at the next poll when a container counts an OOM kill", tree: "v1-cgroupfs",
			file: v1Pod + "/" + ctr2 + "/memory.oom_control", change: "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n", wake: true},
		{name: "v1 stays asleep when only under_oom changes", tree: "v1-cgroupfs",
			file: v1Pod + "/" + ctr2 + "/memory.oom_control", change: "oom_kill_disable 0\nunder_oom 1\noom_kill 0\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := copyTree(t, tc.tree)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := NewPod(Options{Root: root, PodUID: podUID, Poll: 5 * time.Millisecond})
			ch := p.Watch(ctx)
			assert.False(t, woken(ch, 50*time.Millisecond), "no watch before the cgroup is found")
			p.Read()
			// The watch is armed, and the counts it compares with read,
			// before that first wake.
			require.True(t, woken(ch, time.Minute), "a watch wakes once when it begins")

			require.NoError(t, os.WriteFile(filepath.Join(root, tc.file), []byte(tc.change), 0o644))
			if tc.wake {
				// At once, not at a sample: this watch takes none. The
				// bound is only the test's patience.
				assert.True(t, woken(ch, time.Minute), "woken by the change")
			} else {
				assert.False(t, woken(ch, 500*time.Millisecond), "not woken by the change")
			}
		})
	}
}

func TestWatchFileUnderPressure(t *testing.T) {
	t.Run("a storm of memory.events changes is read at most every 10 ms and its OOM kill still wakes", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "memory.events")
		require.NoError(t, os.WriteFile(file, []byte("max 0\n"), 0o644))
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		reads := make(chan oomCounts, 10000)
		counts := func() (oomCounts, error) {
			b, err := os.ReadFile(file)
			c := oomCounts{}
			if bytes.HasPrefix(b, []byte("oom_kill 1")) {
				c.kill = 1
			}
			reads <- c
			return c, err
		}
		ch := make(chan struct{}, 1)
		go func() { _ = watchFile(ctx, file, counts, ch) }()
		require.True(t, woken(ch, time.Minute), "a watch wakes once when it begins")
		<-reads // the counts it compares with, read before that wake

		start := time.Now()
		f, err := os.OpenFile(file, os.O_WRONLY, 0)
		require.NoError(t, err)
		defer f.Close()
		for i := 0; time.Since(start) < 200*time.Millisecond; i++ {
			_, err := f.WriteAt(fmt.Appendf(nil, "max %09d\n", i), 0)
			require.NoError(t, err)
		}
		_, err = f.WriteAt([]byte("oom_kill 1   \n"), 0)
		require.NoError(t, err)
		require.True(t, woken(ch, time.Minute), "the kill at the end of the storm wakes the loop")
		elapsed := time.Since(start)
		assert.LessOrEqual(t, len(reads), int(elapsed/(10*time.Millisecond))+2, "reads in %v", elapsed)
	})
}
