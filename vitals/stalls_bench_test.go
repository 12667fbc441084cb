package vitals

import (
	"testing"
	"time"

	"github.com/runnerguard/runnerguard/vitals/record"
	"github.com/runnerguard/runnerguard/vitals/stall"
)

// BenchmarkStallJudgement is the judgement's cost per line: a pod and
// three containers, every one stalled (their counters rising each line).
func BenchmarkStallJudgement(b *testing.B) {
	s := newStalls(stall.Default)
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	limit := uint64(8 << 30)
	var n uint64
	b.ReportAllocs()
	for b.Loop() {
		n++
		at = at.Add(5 * time.Second)
		m := record.Memory{Limit: &limit, Events: &record.Events{Max: n * 20000},
			Pressure: &record.Pressure{FullTotal: n * 4_900_000}}
		s.observe(record.Line{Time: at, Pod: m, Containers: map[string]record.Memory{"a": m, "b": m, "c": m}})
	}
}
