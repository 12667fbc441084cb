package cgroup

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"
)

// errNoEvents: memory.events is absent or empty, which must not read as
// counters gone back to zero.
var errNoEvents = errors.New("memory.events holds no counters")

// oomCounts are the counters whose change is worth a line at once.
type oomCounts struct{ oom, kill, groupKill uint64 }

// v2Counts reads the pod's memory.events (hierarchical: it counts the
// containers' OOM kills too).
func v2Counts(g Group) func() (oomCounts, error) {
	m, err := cgroup2.Load(g.Rel, cgroup2.WithMountpoint(g.Hierarchy()))
	return func() (oomCounts, error) {
		if err != nil {
			return oomCounts{}, err
		}
		st, err := m.StatFiltered(cgroup2.StatMemoryEvents)
		if err != nil {
			return oomCounts{}, err
		}
		if st.MemoryEvents == nil {
			return oomCounts{}, errNoEvents
		}
		e := st.MemoryEvents
		return oomCounts{oom: e.Oom, kill: e.OomKill, groupKill: e.OomGroupKill}, nil
	}
}

// minGap spaces the reads of a watched file: memory.events also changes at
// each "max" and "high" event, which a pod reclaiming at its limit makes
// thousands of times a second. Events in the gap coalesce in the inotify
// queue, so this caps the reads at 100/s and delays no OOM line by more.
const minGap = 10 * time.Millisecond

// watchFile signals on ch whenever counts changes after file is modified,
// until ctx ends. inotify needs no write access to the cgroup mount (v1's
// eventfd registration does, and the sidecar's mount is read-only).
// containerd/cgroups' EventChan stops at the first event that finds the
// cgroup empty and cannot be stopped, so the watch is done here.
func watchFile(ctx context.Context, file string, counts func() (oomCounts, error), ch chan<- struct{}) error {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return os.NewSyscallError("inotify_init1", err)
	}
	if _, err := unix.InotifyAddWatch(fd, file, unix.IN_MODIFY); err != nil {
		unix.Close(fd)
		return &os.PathError{Op: "inotify_add_watch", Path: file, Err: err}
	}
	// A non-blocking fd in an os.File waits in the runtime poller, so
	// closing it ends the blocked Read.
	f := os.NewFile(uintptr(fd), "inotify")
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	last, _ := counts()
	signal(ch) // the loop compares with its last line: catches a change before the watch began
	buf := make([]byte, 64*unix.SizeofInotifyEvent)
	var read time.Time
	for {
		if _, err := f.Read(buf); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		time.Sleep(minGap - time.Since(read))
		read = time.Now()
		if c, err := counts(); err == nil && c != last {
			last = c
			signal(ch)
		}
	}
}

// poll signals on ch whenever counts changes, checking every interval.
func poll(ctx context.Context, every time.Duration, counts func() (oomCounts, error), ch chan<- struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, _ := counts()
	signal(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if c, err := counts(); err == nil && c != last {
				last = c
				signal(ch)
			}
		}
	}
}

// signal wakes the loop without blocking; one pending wake-up is enough.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
