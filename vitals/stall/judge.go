package stall

import (
	"time"
)

// Bases say what a stall was judged from.
const (
	// BasisPressure (cgroup v2): memory.events max or high rose and
	// memory.pressure "full" (the share of time every task of the cgroup
	// waited on memory) stayed above Thresholds.FullShare.
	BasisPressure = "pressure"
	// BasisFailcnt (cgroup v1, which has no pressure figures): failcnt rose
	// while anonymous memory, which reclaim cannot drop without swap, filled
	// Thresholds.AnonShare of the limit. Weaker: it says the cgroup kept
	// failing to charge with little left to reclaim, not that its tasks
	// waited; a job swapping or streaming anonymous buffers at its limit
	// can look the same.
	BasisFailcnt = "failcnt"
	// BasisUnderOOM (cgroup v1): the kernel says the cgroup is under OOM
	// with its OOM killer disabled (memory.oom_control under_oom): its
	// tasks wait at the limit until memory is freed. Certain, and rare:
	// the kubelet does not disable the OOM killer.
	BasisUnderOOM = "under-oom"
)

// Thresholds are the judgement's rules.
type Thresholds struct {
	// Span is how long the condition must hold without a break before the
	// cgroup is called stalled: a brief touch of the limit is not a stall.
	Span time.Duration
	// Step is the shortest interval judged: readings closer together (a
	// line written at once for an OOM) are folded into the next.
	Step time.Duration
	// FullShare is the share of an interval (0..1) that "full" memory
	// pressure must reach on v2.
	FullShare float64
	// AnonShare is the share of the limit (0..1) that anonymous memory must
	// fill on v1.
	AnonShare float64
	// EventGap is how long an interval may go without a new max or high
	// event (v1: failcnt) and still hold: the kernel puts a task throttled
	// at memory.high to sleep between events, for seconds at a time.
	EventGap time.Duration
	// Tolerance is how long the condition may fail inside a run without
	// ending it: one reading whose pressure dips does not end a stall.
	Tolerance time.Duration
}

// Default is the judgement the sidecar makes (docs/concepts/vitals.md
// states it). The span covers several readings at the sidecar's default
// interval: long enough that a build which reaches its limit and reclaims
// its page cache is never called stalled, short enough that the stall is
// told while the job still runs.
var Default = Thresholds{Span: 30 * time.Second, Step: time.Second, FullShare: 0.5, AnonShare: 0.9,
	EventGap: 10 * time.Second, Tolerance: 10 * time.Second}

// Sample is one reading of one cgroup: the counters the judgement needs.
// A nil pointer is a figure that could not be read.
type Sample struct {
	At time.Time
	// Max and High are memory.events' counters (v2).
	Max, High uint64
	// FullTotal is memory.pressure's "full" total in microseconds (v2).
	FullTotal *uint64
	// Failcnt is memory.failcnt (v1).
	Failcnt *uint64
	// Anon is the cgroup's anonymous memory in bytes (v1 memory.stat
	// total_rss).
	Anon *uint64
	// Limit is the cgroup's memory limit; nil when it has none.
	Limit *uint64
	// UnderOOM is memory.oom_control's under_oom (v1).
	UnderOOM bool
}

// Stall is a stall at the memory limit as judged.
type Stall struct {
	// Began is the start of the first interval in which the condition held.
	Began time.Time
	// Ended is the end of the last interval in which it held; zero while
	// the stall lasts.
	Ended time.Time
	// WorstFull is the highest share of an interval, in percent, that every
	// task waited on memory (v2); nil on v1.
	WorstFull *float64
	// Basis is BasisPressure or BasisFailcnt.
	Basis string
}

// Judge follows one cgroup's readings. Its zero value is not ready: use New.
type Judge struct {
	th   Thresholds
	base *Sample // the start of the interval being judged
	run  *Stall  // the condition's current run, reported or not
	// lastRise is when the events (v1: failcnt) last rose.
	lastRise time.Time
}

// New returns a Judge applying th.
func New(th Thresholds) *Judge { return &Judge{th: th} }

// Verdict is what a reading changed.
type Verdict struct {
	// Stalled is the stall under way, once it has lasted Span; nil otherwise.
	Stalled *Stall
	// Ended is a stall that ended at this reading, having lasted Span.
	Ended *Stall
}

// Observe judges the interval from the previous reading to s.
func (j *Judge) Observe(s Sample) Verdict {
	if j.base == nil || s.At.Before(j.base.At) {
		j.base, j.run, j.lastRise = &s, nil, time.Time{}
		return Verdict{}
	}
	if s.At.Sub(j.base.At) < j.th.Step {
		return j.verdict()
	}
	held, basis, full := j.holds(*j.base, s)
	begin := j.base.At
	j.base = &s
	if !held {
		if j.run != nil && s.At.Sub(j.run.Ended) < j.th.Tolerance {
			return j.verdict() // a dip inside the run
		}
		v := Verdict{}
		if j.reported() {
			ended := *j.run
			v.Ended = &ended
		}
		j.run = nil
		return v
	}
	if j.run == nil || j.run.Basis != basis {
		j.run = &Stall{Began: begin, Basis: basis}
	}
	j.run.Ended = s.At
	if full != nil && (j.run.WorstFull == nil || *full > *j.run.WorstFull) {
		j.run.WorstFull = full
	}
	return j.verdict()
}

// reported says whether the current run has lasted long enough to be told.
func (j *Judge) reported() bool {
	return j.run != nil && j.run.Ended.Sub(j.run.Began) >= j.th.Span
}

func (j *Judge) verdict() Verdict {
	if !j.reported() {
		return Verdict{}
	}
	s := *j.run
	s.Ended = time.Time{}
	return Verdict{Stalled: &s}
}

// holds says whether the stall condition held from a to b, on which basis,
// and the interval's full pressure in percent when it is known: the
// pressure (v1: anonymous memory) at its share, and the events (v1:
// failcnt) rising within EventGap. A counter that went down (a cgroup made
// anew under the same name) breaks the run at once.
func (j *Judge) holds(a, b Sample) (bool, string, *float64) {
	if b.FullTotal != nil && a.FullTotal != nil {
		if *b.FullTotal < *a.FullTotal || b.Max < a.Max || b.High < a.High {
			j.run = nil
			return false, BasisPressure, nil
		}
		micros := float64(b.At.Sub(a.At).Microseconds())
		share := min(float64(*b.FullTotal-*a.FullTotal)/micros, 1)
		pct := share * 100
		recent := j.rose(b.Max > a.Max || b.High > a.High, b.At)
		return recent && share >= j.th.FullShare, BasisPressure, &pct
	}
	if a.UnderOOM && b.UnderOOM {
		return true, BasisUnderOOM, nil
	}
	if b.Failcnt == nil || a.Failcnt == nil || b.Anon == nil || b.Limit == nil || *b.Limit == 0 {
		return false, "", nil
	}
	if *b.Failcnt < *a.Failcnt {
		j.run = nil
		return false, BasisFailcnt, nil
	}
	full := float64(*b.Anon) >= j.th.AnonShare*float64(*b.Limit)
	return j.rose(*b.Failcnt > *a.Failcnt, b.At) && full, BasisFailcnt, nil
}

// rose notes a rise of the events at t and says whether the last one is
// within EventGap of t.
func (j *Judge) rose(rising bool, t time.Time) bool {
	if rising {
		j.lastRise = t
	}
	return !j.lastRise.IsZero() && t.Sub(j.lastRise) <= j.th.EventGap
}

// Close ends the judgement, as when the cgroup is gone: the stall under
// way, if one was told, ended at the last interval that held it.
func (j *Judge) Close() *Stall {
	var out *Stall
	if j.reported() {
		ended := *j.run
		out = &ended
	}
	j.base, j.run = nil, nil
	return out
}
