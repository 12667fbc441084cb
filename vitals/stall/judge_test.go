package stall_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runnerguard/runnerguard/vitals/stall"
)

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func u64(v uint64) *uint64 { return &v }

// step is one interval of a recorded sequence on v2: how far after the
// previous reading, how many max events it saw and the share of it (in
// percent) that every task waited on memory.
type step struct {
	after    time.Duration
	maxDelta uint64
	fullPct  uint64
}

// v2 turns steps into readings, the first at t0 with counters at zero.
func v2(steps ...step) []stall.Sample {
	at, max, full := t0, uint64(0), uint64(0)
	out := []stall.Sample{{At: at, FullTotal: u64(0), Limit: u64(8 << 30)}}
	for _, s := range steps {
		at = at.Add(s.after)
		max += s.maxDelta
		full += uint64(s.after.Microseconds()) * s.fullPct / 100
		out = append(out, stall.Sample{At: at, Max: max, FullTotal: u64(full), Limit: u64(8 << 30)})
	}
	return out
}

func repeat(n int, s step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func join(parts ...[]step) []step {
	var out []step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var (
	storm = step{5 * time.Second, 20000, 97} // reclaiming in a loop
	calm  = step{5 * time.Second, 0, 0}
	touch = step{5 * time.Second, 300, 4} // page cache reclaimed at the limit
)

func pct(v float64) *float64 { return &v }

// run feeds samples to a Judge and returns the verdict of each, and the
// index of the first stalled one (-1: none).
func run(th stall.Thresholds, samples []stall.Sample) ([]stall.Verdict, int) {
	j := stall.New(th)
	first := -1
	var out []stall.Verdict
	for i, s := range samples {
		v := j.Observe(s)
		if v.Stalled != nil && first < 0 {
			first = i
		}
		out = append(out, v)
	}
	return out, first
}

func TestJudge(t *testing.T) {
	cases := []struct {
		name      string
		samples   []stall.Sample
		first     int          // the reading at which the stall is first told; -1: never
		last      *stall.Stall // the stall under way (Ended zero) or ended, at the last reading
		lastEnded bool
	}{
		{
			name:    "a cgroup reclaiming at its limit for 45s is stalled once 30s have passed, from the first interval",
			samples: v2(join(repeat(9, storm))...),
			first:   6,
			last:    &stall.Stall{Began: t0, WorstFull: pct(97), Basis: stall.BasisPressure},
		},
		{
			name:    "a 10s touch of the limit with full pressure is not a stall",
			samples: v2(join(repeat(2, calm), repeat(2, storm), repeat(6, calm))...),
			first:   -1,
		},
		{
			name:    "a 25s run falls short of the span",
			samples: v2(join(repeat(5, storm), repeat(3, calm))...),
			first:   -1,
		},
		{
			name:    "a build reclaiming page cache at its limit for minutes is not stalled",
			samples: v2(repeat(40, touch)...),
			first:   -1,
		},
		{
			name:    "full pressure with no max or high event is not a stall at the limit",
			samples: v2(repeat(12, step{5 * time.Second, 0, 90})...),
			first:   -1,
		},
		{
			name:    "one calm reading inside a run is a dip that does not end it",
			samples: v2(join(repeat(5, storm), repeat(1, calm), repeat(6, storm))...),
			first:   7,
			last:    &stall.Stall{Began: t0, WorstFull: pct(97), Basis: stall.BasisPressure},
		},
		{
			name:    "two calm readings end the run, and the next counts from their end",
			samples: v2(join(repeat(5, storm), repeat(2, calm), repeat(6, storm))...),
			first:   13,
			last:    &stall.Stall{Began: t0.Add(35 * time.Second), WorstFull: pct(97), Basis: stall.BasisPressure},
		},
		{
			name: "a task throttled at memory.high, its events coming in bursts seconds apart, is stalled all along",
			samples: v2(join([]step{{5 * time.Second, 17, 60}}, repeat(8, step{2 * time.Second, 0, 100}),
				[]step{{2 * time.Second, 17, 95}}, repeat(4, step{2 * time.Second, 0, 100}), []step{{2 * time.Second, 17, 95}},
				repeat(6, step{2 * time.Second, 0, 100}))...),
			first: 14,
			last:  &stall.Stall{Began: t0, WorstFull: pct(100), Basis: stall.BasisPressure},
		},
		{
			name:      "a stall that ends is told with its start, end and worst pressure",
			samples:   v2(join(repeat(2, calm), repeat(7, step{5 * time.Second, 9000, 60}), repeat(1, storm), repeat(2, calm))...),
			first:     8,
			last:      &stall.Stall{Began: t0.Add(10 * time.Second), Ended: t0.Add(50 * time.Second), WorstFull: pct(97), Basis: stall.BasisPressure},
			lastEnded: true,
		},
		{
			name: "lines written at once for an OOM are folded into the next interval",
			samples: v2(join(repeat(3, storm), []step{{10 * time.Millisecond, 40, 97}, {4990 * time.Millisecond, 20000, 97}},
				repeat(3, storm))...),
			first: 7,
			last:  &stall.Stall{Began: t0, WorstFull: pct(97), Basis: stall.BasisPressure},
		},
		{
			name: "counters gone back (the cgroup made anew) break the run",
			samples: func() []stall.Sample {
				s := v2(repeat(5, storm)...)
				return append(s, v2(repeat(5, storm)...)[1:]...)
			}(),
			first: -1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			verdicts, first := run(stall.Default, tc.samples)
			assert.Equal(t, tc.first, first)
			last := verdicts[len(verdicts)-1]
			switch {
			case tc.last == nil:
				assert.Nil(t, last.Stalled)
			case tc.lastEnded:
				assert.Nil(t, last.Stalled)
				assert.Equal(t, tc.last, last.Ended)
			default:
				assert.Equal(t, tc.last, last.Stalled)
				assert.Nil(t, last.Ended)
			}
		})
	}
}

// v1Seq makes v1 readings 5s apart: failcnt rising by failDelta, anonymous
// memory at anonPct of a 96 MiB limit.
func v1Seq(n int, failDelta, anonPct uint64) []stall.Sample {
	limit := uint64(96 << 20)
	var out []stall.Sample
	for i := range n {
		out = append(out, stall.Sample{At: t0.Add(time.Duration(i) * 5 * time.Second),
			Failcnt: u64(uint64(i) * failDelta), Anon: u64(limit * anonPct / 100), Limit: u64(limit)})
	}
	return out
}

func TestJudgeV1(t *testing.T) {
	cases := []struct {
		name    string
		samples []stall.Sample
		first   int
		basis   string
	}{
		{"failing charges with anonymous memory filling the limit for 30s are a stall", v1Seq(10, 5000, 97), 6, stall.BasisFailcnt},
		{"failing charges while page cache fills the limit are not", v1Seq(40, 5000, 30), -1, ""},
		{"anonymous memory at the limit with no failing charge is not", v1Seq(40, 0, 99), -1, ""},
		{"a cgroup the kernel holds under OOM, its OOM killer disabled, is stalled though nothing counts", func() []stall.Sample {
			s := v1Seq(10, 0, 50)
			for i := range s {
				s[i].UnderOOM = true
			}
			return s
		}(), 6, stall.BasisUnderOOM},
		{"a cgroup with no limit is never stalled at it", func() []stall.Sample {
			s := v1Seq(20, 5000, 99)
			for i := range s {
				s[i].Limit = nil
			}
			return s
		}(), -1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			verdicts, first := run(stall.Default, tc.samples)
			assert.Equal(t, tc.first, first)
			if first >= 0 {
				got := verdicts[first].Stalled
				assert.Equal(t, tc.basis, got.Basis)
				assert.Nil(t, got.WorstFull, "v1 has no pressure figure")
				assert.Equal(t, t0, got.Began)
			}
		})
	}
}
