package vitals

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/runnerguard/runnerguard/vitals/record"
)

var t0 = time.Date(2025, 11, 22, 23, 0, 0, 0, time.UTC)

const interval = 5 * time.Second

// fakeReader returns the reading the test set last; its Watch channel is
// the test's to fire.
type fakeReader struct {
	mu   sync.Mutex
	line record.Line
	wake chan struct{}
}

func (f *fakeReader) Read() record.Line {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.line
}

func (f *fakeReader) Watch(context.Context) <-chan struct{} { return f.wake }

// set makes the next readings show current bytes and oomKill kills.
func (f *fakeReader) set(current, oomKill uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	limit, peak := uint64(50<<20), max(current, 48<<20)
	f.line = record.Line{Cgroup: "v2", Pod: record.Memory{
		Current: &current, Peak: &peak, Limit: &limit,
		Events: &record.Events{Max: 3 * oomKill, OOM: oomKill, OOMKill: oomKill},
	}}
}

// lines collects what Run writes, one record.Line per Write.
type lines chan record.Line

func (c lines) Write(b []byte) (int, error) {
	var l record.Line
	if err := json.Unmarshal(b, &l); err != nil {
		return 0, err
	}
	c <- l
	return len(b), nil
}

func (c lines) next(t *testing.T) record.Line {
	t.Helper()
	select {
	case l := <-c:
		return l
	case <-time.After(time.Minute):
		require.FailNow(t, "no line written")
		return record.Line{}
	}
}

func (c lines) none(t *testing.T) {
	t.Helper()
	select {
	case l := <-c:
		assert.Failf(t, "unexpected line", "%+v", l)
	case <-time.After(50 * time.Millisecond):
	}
}

// harness runs Run in the background with a fake clock.
type harness struct {
	r      *fakeReader
	out    lines
	clock  *clocktesting.FakeClock
	cancel context.CancelFunc
	done   chan error
	opts   Options
}

func start(t *testing.T, o Options) *harness {
	h := &harness{r: &fakeReader{wake: make(chan struct{})}, out: make(lines, 16),
		clock: clocktesting.NewFakeClock(t0), done: make(chan error, 1)}
	h.r.set(1<<20, 0)
	o.Interval, o.Clock = interval, h.clock
	h.opts = o
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	t.Cleanup(cancel)
	go func() { h.done <- Run(ctx, h.r, h.out, o) }()
	return h
}

// tick moves the fake clock one interval once Run's ticker is there.
func (h *harness) tick(t *testing.T) {
	require.Eventually(t, h.clock.HasWaiters, time.Minute, time.Millisecond)
	h.clock.Step(interval)
}

func (h *harness) stop(t *testing.T) error {
	h.cancel()
	select {
	case err := <-h.done:
		return err
	case <-time.After(time.Minute):
		require.FailNow(t, "Run did not return after cancel")
		return nil
	}
}

func TestRunStreams(t *testing.T) {
	h := start(t, Options{})
	steps := []struct {
		name    string
		do      func()
		trigger string // "" for no line
		oomKill uint64
		at      time.Time
	}{
		{name: "a first reading is written at start", trigger: record.TriggerStart, at: t0},
		{name: "a reading is written each interval", do: func() { h.tick(t) }, trigger: record.TriggerInterval, at: t0.Add(interval)},
		{name: "an OOM kill is written at once when the watch wakes", do: func() { h.r.set(50<<20, 1); h.r.wake <- struct{}{} },
			trigger: record.TriggerOOM, oomKill: 1, at: t0.Add(interval)},
		{name: "a wake-up without new OOM counts writes nothing", do: func() { h.r.wake <- struct{}{} }},
		{name: "the next interval reading is a plain one", do: func() { h.tick(t) }, trigger: record.TriggerInterval, oomKill: 1, at: t0.Add(2 * interval)},
		{name: "an OOM kill the watch missed is marked when the interval finds it", do: func() { h.r.set(2<<20, 2); h.tick(t) },
			trigger: record.TriggerOOM, oomKill: 2, at: t0.Add(3 * interval)},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.do != nil {
				s.do()
			}
			if s.trigger == "" {
				h.out.none(t)
				return
			}
			want := h.r.Read()
			want.V, want.Trigger, want.Time = record.Version, s.trigger, s.at
			got := h.out.next(t)
			assert.Equal(t, want, got)
			assert.Equal(t, s.oomKill, got.Pod.Events.OOMKill)
		})
	}
	require.NoError(t, h.stop(t))
	assert.Equal(t, record.TriggerFinal, h.out.next(t).Trigger)
}

// TestAnOOMStormIsWrittenAtMostOnceAGap: the first kill is on record at
// once; kills while the gap lasts share one line at its end, which counts
// them all; the first kill after a quiet gap is written at once again.
func TestAnOOMStormIsWrittenAtMostOnceAGap(t *testing.T) {
	h := start(t, Options{})
	assert.Equal(t, record.TriggerStart, h.out.next(t).Trigger)
	require.Eventually(t, h.clock.HasWaiters, time.Minute, time.Millisecond) // the ticker

	h.r.set(50<<20, 1)
	h.r.wake <- struct{}{}
	first := h.out.next(t)
	assert.Equal(t, record.TriggerOOM, first.Trigger)
	assert.Equal(t, uint64(1), first.Pod.Events.OOMKill)

	h.clock.Step(DefaultOOMGap / 5)
	for kills := uint64(2); kills <= 5; kills++ {
		h.r.set(50<<20, kills)
		h.r.wake <- struct{}{}
	}
	require.Eventually(t, func() bool { return h.clock.Waiters() == 2 }, time.Minute, time.Millisecond, "the gap's end is awaited")
	h.out.none(t)

	h.clock.Step(DefaultOOMGap - DefaultOOMGap/5)
	shared := h.out.next(t)
	assert.Equal(t, record.TriggerOOM, shared.Trigger)
	assert.Equal(t, uint64(5), shared.Pod.Events.OOMKill, "the shared line counts every kill of the gap")
	assert.Equal(t, t0.Add(DefaultOOMGap), shared.Time)

	h.clock.Step(DefaultOOMGap)
	h.r.set(50<<20, 6)
	h.r.wake <- struct{}{}
	again := h.out.next(t)
	assert.Equal(t, uint64(6), again.Pod.Events.OOMKill, "after a quiet gap a kill is written at once")
	assert.Equal(t, t0.Add(2*DefaultOOMGap), again.Time)
	require.NoError(t, h.stop(t))
}

func TestTheFinalReadingKeepsEachContainerOverThePodsLife(t *testing.T) {
	const runner, sidecar = "aaaa000000000000000000000000000000000000000000000000000000000001", "bbbb000000000000000000000000000000000000000000000000000000000002"
	u := func(n uint64) *uint64 { return &n }
	dir := t.TempDir()
	h := start(t, Options{TerminationPath: filepath.Join(dir, "termination-log")})
	h.out.next(t)
	set := func(l record.Line) {
		h.r.mu.Lock()
		defer h.r.mu.Unlock()
		h.r.line = l
	}
	// The runner nears its 96Mi limit, then is OOM-killed and its cgroup
	// removed (v1): only the ledger's count of it is left.
	set(record.Line{Cgroup: "v1", Pod: record.Memory{Peak: u(110 << 20), Limit: u(128 << 20), Events: &record.Events{}},
		Containers: map[string]record.Memory{
			runner:  {Current: u(90 << 20), Peak: u(96 << 20), Limit: u(96 << 20), Events: &record.Events{}},
			sidecar: {Current: u(8 << 20), Peak: u(9 << 20), Limit: u(32 << 20), Events: &record.Events{}},
		}})
	h.tick(t)
	h.out.next(t)
	set(record.Line{Cgroup: "v1", Pod: record.Memory{Peak: u(110 << 20), Limit: u(128 << 20), Events: &record.Events{OOMKill: 1}},
		Containers: map[string]record.Memory{
			sidecar: {Current: u(8 << 20), Peak: u(9 << 20), Limit: u(32 << 20), Events: &record.Events{}},
		}, GoneOOMKills: map[string]uint64{runner: 1}})
	h.tick(t)
	killedAt := h.out.next(t).Time
	h.tick(t)
	h.out.next(t)
	require.NoError(t, h.stop(t))
	h.out.next(t)

	msg, err := os.ReadFile(h.opts.TerminationPath)
	require.NoError(t, err)
	final, err := record.ParseFinal(string(msg))
	require.NoError(t, err)
	assert.Equal(t, map[string]record.FinalMemory{
		runner:  {Peak: u(96 << 20), Limit: u(96 << 20), OOMKill: 1, OOMKillAt: &killedAt, Gone: true},
		sidecar: {Peak: u(9 << 20), Limit: u(32 << 20)},
	}, final.Containers, "the runner's own peak, limit and kill, though its cgroup is gone, and that it is")
	assert.Equal(t, &killedAt, final.OOMKillAt, "the pod's kill at the reading that first saw it, not at the stop")
	assert.Equal(t, t0.Add(interval*2), killedAt)
}

func TestRunFinal(t *testing.T) {
	many := record.Line{Cgroup: "v1", Pod: record.Memory{Events: &record.Events{OOMKill: 3}}, Containers: map[string]record.Memory{}}
	for i := range 300 {
		id := fmt.Sprintf("%064x", i)
		many.Containers[id] = record.Memory{}
		many.Missing = append(many.Missing, id[:12]+"/memory.oom_control", id[:12]+"/memory.stat")
	}
	cases := []struct {
		name    string
		reading *record.Line // nil: the harness's usual reading
		oomKill uint64
	}{
		{name: "a stop leaves the final reading in the termination message and the shared folder"},
		{name: "a pod of 300 containers with missing files leaves a final reading under 4 KiB", reading: &many, oomKill: 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			h := start(t, Options{OutDir: dir, TerminationPath: filepath.Join(dir, "termination-log")})
			h.out.next(t)
			if tc.reading != nil {
				h.r.mu.Lock()
				h.r.line = *tc.reading
				h.r.mu.Unlock()
			}
			require.NoError(t, h.stop(t))
			last := h.out.next(t)
			assert.Equal(t, record.TriggerFinal, last.Trigger)

			msg, err := os.ReadFile(h.opts.TerminationPath)
			require.NoError(t, err)
			assert.LessOrEqual(t, len(msg), record.MaxFinalBytes)
			final, err := record.ParseFinal(string(msg))
			require.NoError(t, err)
			want := last.Final()
			if tc.oomKill > 0 {
				want.OOMKillAt = &last.Time // the first reading that saw it
			}
			if n := len(final.Missing); n < len(want.Missing) {
				// Shortened to fit (record's tests check how): a prefix and "...".
				require.NotZero(t, n)
				assert.Equal(t, want.Missing[:n-1], final.Missing[:n-1])
				assert.Equal(t, "...", final.Missing[n-1])
				want.Missing = final.Missing
			}
			assert.Equal(t, want, final)
			assert.Equal(t, tc.oomKill, final.OOMKill)

			shared, err := os.ReadFile(filepath.Join(dir, VitalsFile))
			require.NoError(t, err)
			var fromFile record.Line
			require.NoError(t, json.Unmarshal(shared, &fromFile))
			assert.Equal(t, last, fromFile)
			events, err := os.ReadFile(filepath.Join(dir, EventsFile))
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("low 0\nhigh 0\nmax %d\noom %d\noom_kill %d\noom_group_kill 0\n",
				last.Pod.Events.Max, last.Pod.Events.OOM, last.Pod.Events.OOMKill), string(events))
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			assert.Equal(t, []string{EventsFile, PeakFile, "termination-log", VitalsFile}, names, "no temp files are left")
			// A reading without a peak leaves the last known one: peaks only rise.
			peak, err := os.ReadFile(filepath.Join(dir, PeakFile))
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("%d\n", 48<<20), string(peak))
		})
	}
}

// failing is a stdout that cannot be written to.
type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestRunTrouble(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notADir, nil, 0o644))
	cases := []struct {
		name     string
		opts     Options
		stdout   bool // use a failing stdout
		wantErr  string
		wantLogs []string
	}{
		{name: "a shared folder that cannot be written is logged once and the loop goes on",
			opts:     Options{OutDir: notADir},
			wantLogs: []string{"cannot write shared vitals files"}},
		{name: "a stdout that cannot be written is logged once and the loop goes on",
			opts: Options{}, stdout: true,
			wantLogs: []string{"cannot write vitals line"}},
		{name: "a termination message that cannot be written is an error",
			opts:    Options{TerminationPath: filepath.Join(notADir, "termination-log")},
			wantErr: "write final reading to termination message"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			tc.opts.Log = slog.New(slog.NewTextHandler(&logs, nil))
			tc.opts.Interval = time.Millisecond
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			var out interface{ Write([]byte) (int, error) } = lines(make(chan record.Line, 1000))
			if tc.stdout {
				out = failing{}
			}
			err := Run(ctx, &fakeReader{line: record.Line{Cgroup: "v2"}}, out, tc.opts)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			var got []string
			for l := range strings.Lines(logs.String()) {
				got = append(got, l)
			}
			require.Len(t, got, len(tc.wantLogs), logs.String())
			for i, want := range tc.wantLogs {
				assert.Contains(t, got[i], want)
			}
		})
	}
	t.Run("an interval that is not positive is refused", func(t *testing.T) {
		err := Run(context.Background(), &fakeReader{}, lines(make(chan record.Line, 1)), Options{})
		require.ErrorContains(t, err, "interval must be positive")
	})
}
