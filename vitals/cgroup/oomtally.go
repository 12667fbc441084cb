package cgroup

import "time"

// OOM watch modes, as record.Line.OOMWatch names them.
const (
	// WatchNotified: v1, the kernel's OOM notification (an eventfd on each
	// container cgroup's memory.oom_control), read as it comes; a kill
	// whose cgroup the runtime removed before it could be read is counted
	// from its OOM's signal (lostKill).
	WatchNotified = "notified"
	// WatchPolled: v1 without the notification, or v2 without inotify:
	// the counters are read every Options.Poll. On v1 a kill can be missed
	// when the runtime removes the victim's cgroup between two polls.
	WatchPolled = "polled"
	// WatchInotify: v2, inotify on the pod's hierarchical memory.events.
	WatchInotify = "inotify"
)

// tally is what one container cgroup's OOM eventfd has said. The kernel
// signals it at each OOM of the cgroup or of an ancestor, before the OOM
// killer picks a victim, and once more when the cgroup is removed, after
// its files are gone. So a signal read while the cgroup's files still
// answer is an OOM; of those read once they are gone, exactly one is the
// removal (it may still be on its way: the count is then one short until
// it comes).
type tally struct {
	present uint64 // signals read while memory.oom_control still answered
	gone    uint64 // signals read once it did not
}

// signalled counts n signals read from the eventfd; there says whether
// memory.oom_control answered a read made after them.
func (t *tally) signalled(n uint64, there bool) {
	if there {
		t.present += n
	} else {
		t.gone += n
	}
}

// ooms is how many OOMs the signals so far stand for.
func (t tally) ooms() uint64 {
	if t.gone == 0 {
		return t.present
	}
	return t.present + t.gone - 1
}

// chaseFor bounds the reads that follow an OOM signal: the kernel signals
// before its OOM killer counts the kill, and the victim's cgroup cannot be
// removed before the victim has exited and the runtime has noticed, which
// takes far longer than the kill. An OOM the killer ends without a kill
// (the victim was already exiting, memory came free) stops the chase here.
const chaseFor = 500 * time.Millisecond

// chaseStep is the first pause of the chase; each next one doubles. The
// kill usually shows within the first steps; an OOM that ends without one
// (common in a storm, where the cgroup enters OOM again while its victim
// dies) then costs a handful of reads, not one a step for chaseFor.
const chaseStep = time.Millisecond

// chased says whether the reads after an OOM signal can stop: the kill
// counter rose past what it was before the signal, the cgroup is gone, its
// OOM killer is off (the tasks wait under OOM: no kill is coming), or the
// chase has lasted its bound.
func chased(before uint64, now oomControl, there bool, spent time.Duration) bool {
	return !there || now.Kill > before || now.KillDisable || spent >= chaseFor
}

// v1Mode names a v1 pod's OOM watch: notified while every container cgroup
// seen so far has its notification registered, else polled.
func v1Mode(registered, failed int) string {
	if failed == 0 && registered > 0 {
		return WatchNotified
	}
	return WatchPolled
}
