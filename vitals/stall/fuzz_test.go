package stall_test

import (
	"testing"
	"time"

	"github.com/runnerguard/runnerguard/vitals/stall"
)

// FuzzJudge feeds the judge any sequence of readings (times that may go
// back, counters that may fall, figures that may be missing) and holds it
// to what a verdict may say: a stall is told only after the span, ends
// no earlier than it began, and its worst pressure is a percentage.
func FuzzJudge(f *testing.F) {
	f.Add([]byte{5, 200, 97, 5, 200, 97, 5, 200, 97, 5, 200, 97, 5, 200, 97, 5, 200, 97, 5, 200, 97})
	f.Add([]byte{5, 0, 0, 0, 1, 100, 5, 255, 255, 250, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		j := stall.New(stall.Default)
		at := t0
		var maxEv, full, fail uint64
		for len(data) >= 3 {
			dt, ev, p := data[0], data[1], data[2]
			data = data[3:]
			// Times step by up to ~25s, and back when the top bit is set.
			d := time.Duration(dt&0x7f) * 200 * time.Millisecond
			if dt&0x80 != 0 {
				d = -d
			}
			at = at.Add(d)
			if ev == 255 {
				maxEv, full, fail = 0, 0, 0 // the cgroup made anew
			}
			maxEv += uint64(ev)
			full += uint64(max(d, 0).Microseconds()) * uint64(p) / 100
			fail += uint64(ev)
			s := stall.Sample{At: at, Max: maxEv, Limit: u64(1 << 30)}
			if p%7 != 0 {
				s.FullTotal = u64(full)
			} else {
				s.Failcnt, s.Anon = u64(fail), u64(uint64(p)<<23)
			}
			v := j.Observe(s)
			for _, st := range []*stall.Stall{v.Stalled, v.Ended} {
				if st == nil {
					continue
				}
				if st.Began.After(at) {
					t.Fatalf("stall began %v, after the reading at %v", st.Began, at)
				}
				if w := st.WorstFull; w != nil && (*w < 0 || *w > 100) {
					t.Fatalf("worst pressure %v%% is not a percentage", *w)
				}
			}
			if st := v.Stalled; st != nil {
				if !st.Ended.IsZero() {
					t.Fatalf("a stall under way has an end: %+v", st)
				}
				if at.Sub(st.Began) < stall.Default.Span {
					t.Fatalf("stall told %v after it began, under the span", at.Sub(st.Began))
				}
			}
			if st := v.Ended; st != nil {
				if st.Ended.Sub(st.Began) < stall.Default.Span || st.Ended.After(at) {
					t.Fatalf("ended stall %v..%v told at %v", st.Began, st.Ended, at)
				}
				if v.Stalled != nil {
					t.Fatalf("a reading both ended a stall and continued one")
				}
			}
		}
	})
}
