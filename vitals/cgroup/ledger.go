package cgroup

import "sync"

// ledger remembers the highest OOM kill count seen in each container
// cgroup of a v1 pod. v1 counts a kill only in the victim's own cgroup,
// and the runtime removes a container's cgroup when the container ends
// (an OOM-killed runner's, for one), taking the count with it; the pod's
// total must not drop back. Shared by Read and the OOM poll.
type ledger struct {
	mu   sync.Mutex
	seen map[string]uint64
	// ooms are the OOMs the kernel notified in each container cgroup
	// (only where the notification is registered).
	ooms map[string]uint64
}

// note records the count read in a container cgroup and returns the total
// over every container cgroup seen so far.
func (l *ledger) note(container string, kills uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]uint64{}
	}
	l.seen[container] = max(l.seen[container], kills)
	return l.totalLocked()
}

// total is the sum over every container cgroup seen so far.
func (l *ledger) total() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.totalLocked()
}

func (l *ledger) totalLocked() uint64 {
	var n uint64
	for _, k := range l.seen {
		n += k
	}
	return n
}

// gone is the kills counted in container cgroups not in present (by
// directory name), by container id.
func (l *ledger) gone(present map[string]bool) map[string]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out map[string]uint64
	for name, n := range l.seen {
		if n == 0 || present[name] {
			continue
		}
		if id, ok := ContainerID(name); ok {
			if out == nil {
				out = map[string]uint64{}
			}
			out[id] = n
		}
	}
	return out
}

// kills is the highest OOM kill count seen in one container cgroup.
func (l *ledger) kills(container string) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[container]
}

// noteOOM records the OOMs the kernel notified in a container cgroup and
// reports whether the count rose.
func (l *ledger) noteOOM(container string, ooms uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ooms == nil {
		l.ooms = map[string]uint64{}
	}
	if ooms <= l.ooms[container] {
		return false
	}
	l.ooms[container] = ooms
	return true
}

// notified is the OOMs notified in one container cgroup, and over every
// container cgroup seen so far.
func (l *ledger) notified(container string) (own, total uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.ooms {
		total += n
	}
	return l.ooms[container], total
}
