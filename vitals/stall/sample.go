package stall

import (
	"time"

	"github.com/runnerguard/runnerguard/vitals/record"
)

// FromMemory is the sample of one cgroup's reading in a vitals line.
func FromMemory(at time.Time, m record.Memory) Sample {
	s := Sample{At: at, Failcnt: m.Failcnt, Anon: m.Anon, Limit: m.Limit, UnderOOM: m.UnderOOM != nil && *m.UnderOOM}
	if e := m.Events; e != nil {
		s.Max, s.High = e.Max, e.High
	}
	if p := m.Pressure; p != nil {
		s.FullTotal = &p.FullTotal
	}
	return s
}
