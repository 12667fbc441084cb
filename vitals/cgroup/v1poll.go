package cgroup

import (
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// v1Refresh: the poll lists the pod's container cgroups every this many
// polls (once a second at the default 250 ms).
const v1Refresh = 4

// v1Counter reads the OOM kills of a v1 pod for the poll: pod and
// container memory.oom_control files stay open and are re-read with pread
// at offset 0 (kernfs renders the file afresh), one syscall per cgroup.
// os.Open would also register each cgroupfs file with the runtime's
// epoll, and a listing each poll would double the cost.
type v1Counter struct {
	g      Group
	ledger *ledger
	fds    map[string]int // by container dir name, "" for the pod
	polls  int
	buf    [256]byte
}

func newV1Counter(g Group, l *ledger) *v1Counter {
	return &v1Counter{g: g, ledger: l, fds: map[string]int{}}
}

// counts implements the poll's counter: the pod's own kills plus every
// container's, as Group.read counts them.
func (c *v1Counter) counts() (oomCounts, error) {
	if c.polls%v1Refresh == 0 {
		c.refresh()
	}
	c.polls++
	var own uint64
	total := c.ledger.total()
	for name, fd := range c.fds {
		n, err := unix.Pread(fd, c.buf[:], 0)
		if err != nil { // the cgroup is gone (ENODEV): its kills stay in the ledger
			unix.Close(fd)
			delete(c.fds, name)
			if name == "" {
				return oomCounts{}, fmt.Errorf("read pod memory.oom_control: %w", err)
			}
			continue
		}
		oc, err := parseOOMControl(c.buf[:n])
		if err != nil {
			return oomCounts{}, err
		}
		if name == "" {
			own = oc.Kill
		} else {
			total = c.ledger.note(name, oc.Kill)
		}
	}
	if _, ok := c.fds[""]; !ok {
		return oomCounts{}, fmt.Errorf("pod memory.oom_control is not open")
	}
	return oomCounts{kill: own + total}, nil
}

// refresh opens the files of cgroups that appeared since the last listing.
func (c *v1Counter) refresh() {
	names := []string{""}
	for _, ch := range containers(c.g.Dir()) {
		names = append(names, ch.name)
	}
	for _, name := range names {
		if _, ok := c.fds[name]; ok {
			continue
		}
		fd, err := unix.Open(filepath.Join(c.g.Dir(), name, "memory.oom_control"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == nil {
			c.fds[name] = fd
		}
	}
}

func (c *v1Counter) close() {
	for name, fd := range c.fds {
		unix.Close(fd)
		delete(c.fds, name)
	}
}
