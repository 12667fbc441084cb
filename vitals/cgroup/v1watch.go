package cgroup

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// watchV1 is the v1 OOM watch: the poll of the memory.oom_control files
// every Options.Poll, and the kernel's OOM notification on each container
// cgroup where it can be registered, which reads a kill before the runtime
// can remove the victim's cgroup (the poll can miss it then). The poll
// stays on beside it for the pod cgroup's own counter and for any cgroup
// whose registration failed.
func (p *Pod) watchV1(ctx context.Context, g Group, ch chan<- struct{}) {
	c := newV1Counter(g, p.state.kills)
	defer c.close()
	n := newNotifier(g.Dir(), p.state.kills)
	defer n.close()
	p.register(n)
	created := watchCreated(ctx, g.Dir())
	t := time.NewTicker(p.opts.Poll)
	defer t.Stop()
	last, _ := c.counts()
	signal(ch) // the loop compares with its last line: catches a change before the watch began
	for polls := 1; ; {
		select {
		case <-ctx.Done():
			return
		case <-created:
			p.register(n)
		case <-n.changed:
			signal(ch)
		case <-t.C:
			if polls++; polls%v1Refresh == 0 {
				p.register(n)
			}
			if cur, err := c.counts(); err == nil && cur != last {
				last = cur
				signal(ch)
			}
		}
	}
}

// register registers the notification on new container cgroups, logs the
// first failure, and keeps the mode the lines name.
func (p *Pod) register(n *notifier) {
	if err := n.refresh(); err != nil && p.onceSync("notify: "+errKey(err)) {
		p.opts.Log.Warn("cannot register the kernel's OOM notification; polling instead, which can miss an OOM kill when the runtime removes the victim's cgroup first",
			"err", err, "every", p.opts.Poll, "needs", "a writable cgroup mount and root or CAP_DAC_OVERRIDE")
	}
	p.setMode(n.mode())
}

// errKey is err without the path it names: each container's registration
// fails alike, and one warning says it.
func errKey(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + " " + filepath.Base(pe.Path) + ": " + pe.Err.Error()
	}
	return err.Error()
}

// watchCreated signals when a directory is made in dir (a new container
// cgroup), so its notification is registered at once rather than at the
// poll's next listing. It returns nil (never ready) when inotify fails.
func watchCreated(ctx context.Context, dir string) <-chan struct{} {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "inotify")
	context.AfterFunc(ctx, func() { f.Close() })
	ch := make(chan struct{}, 1)
	go func() {
		buf := make([]byte, 16*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
		for {
			if _, err := f.Read(buf); err != nil {
				return
			}
			signal(ch)
		}
	}()
	return ch
}
