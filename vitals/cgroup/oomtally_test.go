package cgroup

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTallyOOMs(t *testing.T) {
	type read struct {
		n     uint64
		there bool
	}
	cases := []struct {
		name  string
		reads []read
		want  uint64
	}{
		{name: "no signal is no OOM", want: 0},
		{name: "a signal read while the cgroup answers is an OOM", reads: []read{{1, true}}, want: 1},
		{name: "signals that coalesced before one read are as many OOMs", reads: []read{{3, true}}, want: 3},
		{name: "the one signal of a removal is no OOM", reads: []read{{1, false}}, want: 0},
		{name: "an OOM then the removal, read apart, is one OOM", reads: []read{{1, true}, {1, false}}, want: 1},
		{name: "an OOM and the removal read together once the cgroup is gone is one OOM", reads: []read{{2, false}}, want: 1},
		{name: "an OOM read once the cgroup is gone counts when the removal's signal comes after it",
			reads: []read{{1, false}, {1, false}}, want: 1},
		{name: "OOMs before and after a read, then the removal, are all counted", reads: []read{{1, true}, {2, true}, {2, false}}, want: 4},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var tl tally
			for _, r := range tc.reads {
				tl.signalled(r.n, r.there)
			}
			assert.Equal(t, tc.want, tl.ooms())
		})
	}
}

func TestChased(t *testing.T) {
	cases := []struct {
		name   string
		before uint64
		now    oomControl
		there  bool
		spent  time.Duration
		want   bool
	}{
		{name: "the kill not yet counted keeps the chase on", before: 0, now: oomControl{Kill: 0, HasKill: true}, there: true},
		{name: "the kill counted ends the chase", before: 0, now: oomControl{Kill: 1, HasKill: true}, there: true, want: true},
		{name: "an earlier kill alone keeps the chase on", before: 2, now: oomControl{Kill: 2, HasKill: true}, there: true},
		{name: "the cgroup gone ends the chase", before: 0, there: false, want: true},
		{name: "a cgroup whose OOM killer is off ends the chase at once: its tasks wait, no kill comes",
			now: oomControl{KillDisable: true, UnderOOM: true, HasKill: true}, there: true, want: true},
		{name: "an OOM that ends without a kill ends the chase at its bound", now: oomControl{HasKill: true}, there: true, spent: chaseFor, want: true},
		{name: "a kernel that counts no kills ends the chase at its bound", now: oomControl{UnderOOM: true}, there: true, spent: chaseFor, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, chased(tc.before, tc.now, tc.there, tc.spent))
		})
	}
}

func TestV1Mode(t *testing.T) {
	cases := []struct {
		name               string
		registered, failed int
		want               string
	}{
		{name: "every container cgroup registered is notified", registered: 2, want: WatchNotified},
		{name: "a failed registration is polled", registered: 1, failed: 1, want: WatchPolled},
		{name: "no registration that worked is polled", failed: 2, want: WatchPolled},
		{name: "no container cgroup yet is polled", want: WatchPolled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, v1Mode(tc.registered, tc.failed))
		})
	}
}

// An OOM whose cgroup went before its kill counter could be read counts
// the kill it ended in; a removal alone, a kill read, an OOM of a cgroup
// whose killer is off, or an OOM after a kill already read (the dying
// victim's, seen in the node suite) counts none.
func TestLostKill(t *testing.T) {
	for _, tc := range []struct {
		name               string
		newOOM, there, off bool
		seen               uint64
		want               bool
	}{
		{name: "a new OOM, its cgroup gone, its killer on, no kill read: the kill went with it", newOOM: true, want: true},
		{name: "the cgroup still there: its counter says", newOOM: true, there: true},
		{name: "only the removal's signal: no OOM", there: false},
		{name: "the killer off: the OOM killed nothing", newOOM: true, off: true},
		{name: "a kill already read: a later OOM is the victim dying", newOOM: true, seen: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, lostKill(tc.newOOM, tc.there, tc.off, tc.seen))
		})
	}
}
