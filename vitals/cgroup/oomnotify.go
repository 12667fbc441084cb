package cgroup

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
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
	// changed tells the watch loop that a listener noted an OOM or a kill
	// in the ledger.
	changed   chan struct{}
	listeners sync.WaitGroup
}

// registration is one container cgroup's eventfd and its open
// memory.oom_control, read at each signal by the registration's own
// listener (tally is the listener's alone).
type registration struct {
	efd   int
	oc    int
	tally tally
	// killOff: the cgroup's OOM killer was off at the last read
	// (oom_kill_disable), so an OOM of it kills nothing.
	killOff bool
	closing atomic.Bool
}

func newNotifier(dir string, l *ledger) *notifier {
	return &notifier{dir: dir, ledger: l, regs: map[string]*registration{}, failed: map[string]error{},
		changed: make(chan struct{}, 1)}
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
		n.listeners.Go(func() { n.listen(ch.name, r) })
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
	// Blocking: the listener's thread sleeps in read(2), and the kernel's
	// signal wakes that thread itself, with no poller between.
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(oc)
		return nil, os.NewSyscallError("eventfd", err)
	}
	ctl := filepath.Join(dir, "cgroup.event_control")
	f, err := os.OpenFile(ctl, os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(strconv.Itoa(efd) + " " + strconv.Itoa(oc))
		err = cmpOr(err, f.Close())
	}
	if err != nil {
		unix.Close(efd)
		unix.Close(oc)
		return nil, err
	}
	return &registration{efd: efd, oc: oc}, nil
}

// listen handles each read of the eventfd's counter at once, in the
// thread the kernel's signal woke (handle), until the notifier closes: the
// kernel signals an OOM before its killer counts the kill, and the runtime
// may remove the victim's cgroup, taking the count, soon after the victim
// exits; a hand-off to another goroutine first could come too late.
func (n *notifier) listen(name string, r *registration) {
	var b [8]byte
	for {
		k, err := unix.Read(r.efd, b[:])
		if r.closing.Load() {
			return
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil || k != len(b) {
			return
		}
		if n.handle(name, r, binary.NativeEndian.Uint64(b[:])) {
			select {
			case n.changed <- struct{}{}:
			default: // the watch loop has yet to take the last one, which says the same
			}
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

// handle counts signals read from container name's eventfd and, for an
// OOM, reads the kill counter until the kill shows (see chased), noting
// what it read in the ledger. It reports whether the ledger changed.
func (n *notifier) handle(name string, r *registration, signals uint64) bool {
	before, oomsBefore := n.ledger.kills(name), r.tally.ooms()
	now, there := r.read()
	r.tally.signalled(signals, there)
	step := chaseStep
	for start := time.Now(); ; now, there = r.read() {
		if there {
			r.killOff = now.KillDisable
		}
		if chased(before, now, there, time.Since(start)) {
			break
		}
		time.Sleep(step)
		step *= 2
	}
	changed := n.ledger.noteOOM(name, r.tally.ooms())
	switch {
	case there && now.Kill > before:
		n.ledger.note(name, now.Kill)
		changed = true
	case lostKill(r.tally.ooms() > oomsBefore, there, r.killOff, before):
		n.ledger.note(name, before+1)
		changed = true
	}
	return changed
}

// lostKill says whether an OOM's kill went with its cgroup: the signals
// stood for a new OOM, the cgroup was gone before its kill counter could
// be read (under load, or a runtime that removes the cgroup at once), its
// OOM killer was on, and no kill of it was read before (seen). On v1 the
// count lives only in the victim's own cgroup; a container whose cgroup
// goes right after its OOM, with no kill counted yet, was ended by that
// OOM's kill, so it is counted rather than lost. Once a kill was read, a
// later OOM is most often the dying victim's memory, which kills no one.
func lostKill(newOOM, there, killOff bool, seen uint64) bool {
	return newOOM && !there && !killOff && seen == 0
}

// close wakes each listener (a write to its eventfd ends its read(2);
// closing the fd would not), waits for them, then closes the fds.
func (n *notifier) close() {
	one := make([]byte, 8)
	binary.NativeEndian.PutUint64(one, 1)
	for _, r := range n.regs {
		r.closing.Store(true)
		_, _ = unix.Write(r.efd, one)
	}
	n.listeners.Wait()
	for name, r := range n.regs {
		unix.Close(r.efd)
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
