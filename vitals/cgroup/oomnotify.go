package cgroup

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// notifier holds the kernel's OOM notification for each container cgroup
// of a v1 pod: an eventfd registered on its memory.oom_control through its
// cgroup.event_control. The notification goes to the cgroup that hit its
// limit and its descendants, never to its ancestors, so it is registered
// on every container cgroup (a runner hits its container's limit), not on
// the pod's. Registering needs write access to cgroup.event_control: a
// writable cgroup mount, and root (the file is the root user's, write-only)
// or CAP_DAC_OVERRIDE.
type notifier struct {
	dir    string
	ledger *ledger
	regs   map[string]*registration // by container dir name
	failed map[string]error         // by container dir name
	// signals carries each eventfd's reads to the watch loop, until done.
	signals chan notice
	done    chan struct{}
}

// registration is one container cgroup's eventfd and its open
// memory.oom_control, read at each signal.
type registration struct {
	ev    *os.File
	oc    int
	tally tally
}

// notice is n signals read from a container's eventfd.
type notice struct {
	name string
	n    uint64
}

func newNotifier(dir string, l *ledger) *notifier {
	return &notifier{dir: dir, ledger: l, regs: map[string]*registration{}, failed: map[string]error{},
		signals: make(chan notice, 16), done: make(chan struct{})}
}

// refresh registers the container cgroups that appeared since the last
// call. It returns the first registration error, which is the same for
// every cgroup of a pod (the mount, the user).
func (n *notifier) refresh() error {
	var first error
	for _, ch := range containers(n.dir) {
		if _, ok := n.regs[ch.name]; ok {
			continue
		}
		if _, ok := n.failed[ch.name]; ok {
			continue
		}
		r, err := register(filepath.Join(n.dir, ch.name))
		if err != nil {
			n.failed[ch.name] = err
			first = cmpOr(first, err)
			continue
		}
		n.regs[ch.name] = r
		go r.listen(ch.name, n.signals, n.done)
	}
	return first
}

// mode names the watch so far.
func (n *notifier) mode() string { return v1Mode(len(n.regs), len(n.failed)) }

// register opens dir's memory.oom_control and registers a new eventfd on
// it: "<eventfd> <fd of memory.oom_control>" written to cgroup.event_control.
func register(dir string) (*registration, error) {
	oc, err := unix.Open(filepath.Join(dir, "memory.oom_control"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(dir, "memory.oom_control"), Err: err}
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(oc)
		return nil, os.NewSyscallError("eventfd", err)
	}
	// A non-blocking fd in an os.File waits in the runtime poller, so
	// closing it ends the blocked Read.
	ev := os.NewFile(uintptr(efd), "oom-eventfd")
	ctl := filepath.Join(dir, "cgroup.event_control")
	f, err := os.OpenFile(ctl, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(strconv.Itoa(efd) + " " + strconv.Itoa(oc))
		err = cmpOr(err, f.Close())
	}
	if err != nil {
		ev.Close()
		unix.Close(oc)
		return nil, err
	}
	return &registration{ev: ev, oc: oc}, nil
}

// listen sends each read of the eventfd's counter until it is closed.
func (r *registration) listen(name string, out chan<- notice, done <-chan struct{}) {
	var b [8]byte
	for {
		if _, err := r.ev.Read(b[:]); err != nil {
			return
		}
		select {
		case out <- notice{name: name, n: binary.NativeEndian.Uint64(b[:])}:
		case <-done:
			return
		}
	}
}

// read reads memory.oom_control; false once the cgroup is gone.
func (r *registration) read() (oomControl, bool) {
	var buf [256]byte
	k, err := unix.Pread(r.oc, buf[:], 0)
	if err != nil {
		return oomControl{}, false
	}
	oc, err := parseOOMControl(buf[:k])
	return oc, err == nil
}

// handle counts a notice and, for an OOM, reads the kill counter until the
// kill shows (see chased), noting what it read in the ledger. It reports
// whether the ledger changed.
func (n *notifier) handle(s notice) bool {
	r := n.regs[s.name]
	if r == nil {
		return false
	}
	before := n.ledger.kills(s.name)
	now, there := r.read()
	r.tally.signalled(s.n, there)
	step := chaseStep
	for start := time.Now(); !chased(before, now, there, time.Since(start)); now, there = r.read() {
		time.Sleep(step)
		step *= 2
	}
	changed := n.ledger.noteOOM(s.name, r.tally.ooms())
	if there && now.Kill > before {
		n.ledger.note(s.name, now.Kill)
		changed = true
	}
	return changed
}

func (n *notifier) close() {
	close(n.done)
	for name, r := range n.regs {
		r.ev.Close()
		unix.Close(r.oc)
		delete(n.regs, name)
	}
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
