package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Version is the schema version carried in every line as "v". Fields are
// only ever added within a version.
const Version = 1

// Triggers say why a line was written.
const (
	TriggerStart    = "start"
	TriggerInterval = "interval"
	TriggerOOM      = "oom" // the OOM counters changed
	TriggerFinal    = "final"
	TriggerStall    = "stall" // a stall at the memory limit was told or ended
)

// Line is one reading of the pod's memory cgroup.
type Line struct {
	V       int       `json:"v"`
	Time    time.Time `json:"ts"`
	Trigger string    `json:"trigger"`
	// Cgroup is "v1" or "v2".
	Cgroup string `json:"cgroup"`
	Pod    Memory `json:"pod"`
	// Containers are the pod's container cgroups, by container id.
	Containers map[string]Memory `json:"containers,omitempty"`
	// GoneOOMKills (v1) are the OOM kills counted in container cgroups
	// the runtime has removed since, by container id: on v1 a kill is
	// counted only in the victim's cgroup, which goes with the container.
	GoneOOMKills map[string]uint64 `json:"gone_oom_kills,omitempty"`
	// Missing names the files that could not be read for this line.
	Missing []string `json:"missing,omitempty"`
	// OOMWatch is how the sidecar learns of OOM kills: "notified" (v1,
	// the kernel's OOM notification on each container cgroup, which no
	// removal of the cgroup can race), "polled" (the counters read at
	// each poll: on v1 a kill is missed when the runtime removes the
	// victim's cgroup between two reads), "inotify" (v2, whose counters
	// are hierarchical and never lost). Absent before the watch starts.
	OOMWatch string `json:"oom_watch,omitempty"`
	// Stall is present while a cgroup of the pod is stalled at its memory
	// limit, and on the line where such a stall ended.
	Stall *Stall `json:"stall,omitempty"`
}

// Stall is a stall at the memory limit: the cgroup's tasks reclaiming in a
// loop and making no progress, with no OOM kill to end it. Package
// vitals/stall states the rules.
type Stall struct {
	Began time.Time `json:"began"`
	// Ended is absent while the stall lasts.
	Ended *time.Time `json:"ended,omitempty"`
	// WorstFull is the highest share of a reading's interval, in percent,
	// that every task of the cgroup waited on memory (v2 only).
	WorstFull *float64 `json:"worst_full,omitempty"`
	// Basis is "pressure" (v2), "failcnt" (v1, weaker) or "under-oom" (v1).
	Basis string `json:"basis"`
	// Container is the id of the container whose cgroup stalled; absent:
	// the pod's.
	Container string `json:"container,omitempty"`
}

// Memory is one cgroup's memory reading. Absent fields were not readable.
type Memory struct {
	Current *uint64 `json:"current,omitempty"`
	Peak    *uint64 `json:"peak,omitempty"`
	// PeakObserved: the kernel has no memory.peak, so Peak is the highest
	// current seen by the sidecar, which can miss a short spike.
	PeakObserved bool `json:"peak_observed,omitempty"`
	// Limit is absent when the cgroup has no limit ("max").
	Limit   *uint64 `json:"limit,omitempty"`
	Events  *Events `json:"events,omitempty"`
	Failcnt *uint64 `json:"failcnt,omitempty"` // v1 only
	// Anon (v1) is the anonymous memory charged to the cgroup and its
	// children (memory.stat total_rss): what reclaim cannot drop without swap.
	Anon     *uint64   `json:"anon,omitempty"`
	UnderOOM *bool     `json:"under_oom,omitempty"` // v1 only
	Pressure *Pressure `json:"pressure,omitempty"`  // v2 memory.pressure
}

// Events are the memory.events counters (on v1, oom_kill from
// memory.oom_control, oom the OOMs the kernel notified where the sidecar
// registered its notification; the others stay zero). A pod's counters include its
// containers' on both versions: v2 counts hierarchically, and on v1, which
// counts a kill only in the victim's cgroup, the pod's oom_kill is its own
// plus the highest seen in each container cgroup, removed ones included.
type Events struct {
	Low          uint64 `json:"low"`
	High         uint64 `json:"high"`
	Max          uint64 `json:"max"`
	OOM          uint64 `json:"oom"`
	OOMKill      uint64 `json:"oom_kill"`
	OOMGroupKill uint64 `json:"oom_group_kill"`
}

// Pressure is memory PSI: averages in percent, totals in microseconds.
type Pressure struct {
	SomeAvg10 float64 `json:"some_avg10"`
	SomeAvg60 float64 `json:"some_avg60"`
	SomeTotal uint64  `json:"some_total"`
	FullAvg10 float64 `json:"full_avg10"`
	FullAvg60 float64 `json:"full_avg60"`
	FullTotal uint64  `json:"full_total"`
}

// ProbePath is the path of the sidecar's readiness probe: not ready while
// a stall at the memory limit is under way. The injector's probe and the
// sidecar agree on it here.
const ProbePath = "/ready"

// MaxFinalBytes is what the kubelet keeps of a termination message.
const MaxFinalBytes = 4096

// Final is the compact pod-level reading the sidecar leaves in its
// termination message, well under MaxFinalBytes.
type Final struct {
	V       int       `json:"v"`
	Time    time.Time `json:"ts"`
	Cgroup  string    `json:"cg"`
	OOM     uint64    `json:"oom"`
	OOMKill uint64    `json:"oom_kill"`
	Peak    *uint64   `json:"peak,omitempty"`
	// PeakObserved as in Memory.
	PeakObserved bool     `json:"peak_observed,omitempty"`
	Limit        *uint64  `json:"limit,omitempty"`
	Current      *uint64  `json:"current,omitempty"`
	Missing      []string `json:"missing,omitempty"`
	// OOMWatch as in Line.
	OOMWatch string `json:"oom_watch,omitempty"`
	// OOMKillAt is the time of the first reading that saw the pod's
	// oom_kill rise.
	OOMKillAt *time.Time `json:"oom_kill_at,omitempty"`
	// Containers are the container cgroups seen in the pod's life, removed
	// ones included, by container id: what a death record needs to speak
	// of the runner container itself rather than the pod.
	Containers map[string]FinalMemory `json:"containers,omitempty"`
	// Stall is the last stall at the memory limit told in the pod's life,
	// Ended absent when it lasted to this reading.
	Stall *Stall `json:"stall,omitempty"`
}

// FinalMemory is one container cgroup over the pod's life: its highest
// peak, its last limit, its highest OOM counts and when its oom_kill first
// rose.
type FinalMemory struct {
	Peak         *uint64    `json:"peak,omitempty"`
	PeakObserved bool       `json:"peak_observed,omitempty"`
	Limit        *uint64    `json:"limit,omitempty"`
	OOM          uint64     `json:"oom"`
	OOMKill      uint64     `json:"oom_kill"`
	OOMKillAt    *time.Time `json:"oom_kill_at,omitempty"`
	// Gone: the cgroup was removed before the final reading, so Peak is
	// only the highest the readings saw while it was there. On v1, where
	// the peak is read with the other figures, a container that grew and
	// was killed between two readings leaves a Peak far below its limit.
	Gone bool `json:"gone,omitempty"`
}

// Final makes the compact final reading of a line.
func (l Line) Final() Final {
	f := Final{
		V: Version, Time: l.Time, Cgroup: l.Cgroup,
		Peak: l.Pod.Peak, PeakObserved: l.Pod.PeakObserved,
		Limit: l.Pod.Limit, Current: l.Pod.Current, Missing: l.Missing, Stall: l.Stall,
		OOMWatch: l.OOMWatch,
	}
	if e := l.Pod.Events; e != nil {
		f.OOM, f.OOMKill = e.OOM, e.OOMKill
	}
	return f
}

// ErrNoFinal means the message holds no final reading (the sidecar did not
// leave one, or the message is someone else's).
var ErrNoFinal = errors.New("no vitals final reading")

// ParseFinal reads a termination message written by the sidecar.
func ParseFinal(msg string) (Final, error) {
	if msg == "" {
		return Final{}, ErrNoFinal
	}
	var f Final
	if err := json.Unmarshal([]byte(msg), &f); err != nil {
		return Final{}, fmt.Errorf("%w: %w", ErrNoFinal, err)
	}
	if f.V < 1 || f.V > Version {
		return Final{}, fmt.Errorf("%w: schema version %d, want 1..%d", ErrNoFinal, f.V, Version)
	}
	return f, nil
}
