package vitals

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/vitals/record"
	"github.com/runnerguard/runnerguard/vitals/stall"
)

// stallAt sets readings of a runner container reclaiming at its 8 GiB
// limit: n intervals into the storm when storming, calm after.
func (f *fakeReader) stallAt(n uint64, fullPct uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	limit, cur := uint64(8<<30), uint64(8<<30)
	micros := uint64(interval.Microseconds())
	mem := record.Memory{Current: &cur, Limit: &limit,
		Events:   &record.Events{Max: n * 20000},
		Pressure: &record.Pressure{FullTotal: n * micros * fullPct / 100}}
	f.line = record.Line{Cgroup: "v2", Pod: mem, Containers: map[string]record.Memory{"runner1": mem}}
}

func TestAStallIsToldOnTheLineOnceItHasLastedTheSpanAndKeptInTheFinalReading(t *testing.T) {
	dir := t.TempDir()
	h := start(t, Options{TerminationPath: filepath.Join(dir, "termination-log")})
	h.out.next(t)
	// The start line may predate these readings: one line of them first.
	h.r.stallAt(0, 0)
	h.tick(t)
	h.out.next(t)
	span := int(stall.Default.Span / interval)
	for i := 1; i <= span+2; i++ {
		h.r.stallAt(uint64(i), 98)
		h.tick(t)
		l := h.out.next(t)
		if i < span {
			assert.Nil(t, l.Stall, "reading %d, before the span", i)
			assert.Equal(t, record.TriggerInterval, l.Trigger)
			continue
		}
		require.NotNil(t, l.Stall, "reading %d, at the span", i)
		assert.Equal(t, "runner1", l.Stall.Container, "the container's cgroup names the limit reached")
		assert.Equal(t, t0.Add(interval), l.Stall.Began, "the stall began with the first interval that held")
		assert.Nil(t, l.Stall.Ended)
		if i == span {
			assert.Equal(t, record.TriggerStall, l.Trigger, "told at once, on its own trigger")
		} else {
			assert.Equal(t, record.TriggerInterval, l.Trigger)
		}
	}
	require.NoError(t, h.stop(t))
	final := h.out.next(t)
	require.NotNil(t, final.Stall, "the stall lasted to the final reading")

	msg, err := os.ReadFile(h.opts.TerminationPath)
	require.NoError(t, err)
	f, err := record.ParseFinal(string(msg))
	require.NoError(t, err)
	require.NotNil(t, f.Stall)
	assert.Nil(t, f.Stall.Ended, "it lasted to the end")
	assert.Equal(t, t0.Add(interval), f.Stall.Began)
	assert.InDelta(t, 98, *f.Stall.WorstFull, 0.01)
}

func TestAStallThatEndsIsToldEndedOnceAndKeptWithItsEnd(t *testing.T) {
	dir := t.TempDir()
	h := start(t, Options{TerminationPath: filepath.Join(dir, "termination-log")})
	h.out.next(t)
	// The start line may predate these readings: one line of them first.
	h.r.stallAt(0, 0)
	h.tick(t)
	h.out.next(t)
	n := uint64(stall.Default.Span/interval) + 1
	for i := uint64(1); i <= n; i++ {
		h.r.stallAt(i, 90)
		h.tick(t)
		h.out.next(t)
	}
	// The job freed its memory: the counters stop rising.
	h.tick(t)
	assert.Nil(t, h.out.next(t).Stall.Ended, "one calm reading is a dip")
	h.tick(t)
	ended := h.out.next(t)
	require.NotNil(t, ended.Stall)
	assert.Equal(t, record.TriggerStall, ended.Trigger)
	require.NotNil(t, ended.Stall.Ended)
	assert.Equal(t, t0.Add(time.Duration(n+1)*interval), *ended.Stall.Ended)
	h.tick(t)
	assert.Nil(t, h.out.next(t).Stall, "told once")
	require.NoError(t, h.stop(t))
	h.out.next(t)
	msg, err := os.ReadFile(h.opts.TerminationPath)
	require.NoError(t, err)
	f, err := record.ParseFinal(string(msg))
	require.NoError(t, err)
	require.NotNil(t, f.Stall)
	assert.Equal(t, ended.Stall.Ended, f.Stall.Ended)
}
