package vitals

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"k8s.io/utils/clock"

	"github.com/runnerguard/runnerguard/vitals/cgroup"
	"github.com/runnerguard/runnerguard/vitals/record"
	"github.com/runnerguard/runnerguard/vitals/stall"
)

// Options configure Run.
type Options struct {
	// Interval between readings; an OOM kill is reported at once.
	Interval time.Duration
	// OutDir, when set, gets memory.events, memory.peak and vitals.json
	// after each line (the emptyDir the runner container reads).
	OutDir string
	// TerminationPath, when set, gets the final reading on return.
	TerminationPath string
	// Clock defaults to the real clock.
	Clock clock.WithTicker
	Log   *slog.Logger
	// Stall is the judgement of a stall at the memory limit; zero: stall.Default.
	Stall stall.Thresholds
	// Probe, when set, is told whether a stall is under way.
	Probe *Probe
	// OOMGap is the least time between two OOM lines; zero: DefaultOOMGap.
	OOMGap time.Duration
}

// DefaultOOMGap bounds an OOM storm's cost: a container OOM-killed over
// and over wakes the watch at the kernel's pace, and each line reads every
// cgroup of the pod. The first kill after a quiet gap is written at once;
// kills within the gap are written together at its end. The counters are
// cumulative, so no kill goes uncounted, only its line is shared.
const DefaultOOMGap = 250 * time.Millisecond

// Run streams readings of r to w as JSON lines until ctx ends, then takes a
// final reading, writes it to the termination message and returns. Errors
// writing lines or shared files are logged once and the loop goes on: the
// sidecar must outlive trouble; only a failed termination message is an error.
func Run(ctx context.Context, r cgroup.Reader, w io.Writer, o Options) error {
	if o.Interval <= 0 {
		return fmt.Errorf("interval must be positive, got %v", o.Interval)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.OOMGap <= 0 {
		o.OOMGap = DefaultOOMGap
	}
	if o.Stall == (stall.Thresholds{}) {
		o.Stall = stall.Default
	}
	s := &sampler{r: r, w: w, o: o, logged: map[string]bool{}, containers: map[string]record.FinalMemory{},
		stalls: newStalls(o.Stall)}
	s.emit(record.TriggerStart, false)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	wake := r.Watch(watchCtx)
	t := o.Clock.NewTicker(o.Interval)
	defer t.Stop()
	var lastOOM time.Time
	var held <-chan time.Time // the end of a gap with a wake-up waiting
	oom := func() {
		if s.emit(record.TriggerOOM, true).Trigger == record.TriggerOOM {
			lastOOM = o.Clock.Now()
		}
	}
	for {
		select {
		case <-ctx.Done():
			return s.final()
		case <-t.C():
			s.emit(record.TriggerInterval, false)
		case <-wake:
			switch since := o.Clock.Since(lastOOM); {
			case held != nil:
			case since < o.OOMGap:
				held = o.Clock.After(o.OOMGap - since)
			default:
				oom()
			}
		case <-held:
			held = nil
			oom()
		}
	}
}

type sampler struct {
	r      cgroup.Reader
	w      io.Writer
	o      Options
	known  *record.Events // the last OOM counters read
	logged map[string]bool
	// containers is each container cgroup seen so far, for the final
	// reading: a runner's own cgroup is often gone by then (the runtime
	// removes it when the runner ends).
	containers map[string]record.FinalMemory
	// oomKillAt is when a reading first saw the pod's oom_kill rise.
	oomKillAt *time.Time
	stalls    *stalls
}

// emit takes a reading and writes it. A reading whose OOM counters changed
// is an "oom" line whatever woke the loop; onlyOOM drops readings where
// they did not (a watch wake-up the interval line already reported).
func (s *sampler) emit(trigger string, onlyOOM bool) record.Line {
	l := s.r.Read()
	l.V, l.Time = record.Version, s.o.Clock.Now().UTC().Truncate(time.Millisecond)
	changed := false
	if e := l.Pod.Events; e != nil {
		k := s.known
		changed = k != nil && (e.OOM != k.OOM || e.OOMKill != k.OOMKill || e.OOMGroupKill != k.OOMGroupKill)
		if s.oomKillAt == nil && e.OOMKill > 0 {
			s.oomKillAt = &l.Time
		}
		s.known = e
	}
	s.track(l)
	var news bool
	l.Stall, news = s.stalls.observe(l)
	if s.o.Probe != nil {
		s.o.Probe.set(l.Stall)
	}
	if onlyOOM && !changed && !news {
		return l
	}
	switch {
	case changed && trigger != record.TriggerStart && trigger != record.TriggerFinal:
		trigger = record.TriggerOOM
	case news && trigger != record.TriggerStart && trigger != record.TriggerFinal:
		trigger = record.TriggerStall
	}
	l.Trigger = trigger
	if err := record.WriteLine(s.w, l); err != nil {
		s.warnOnce("cannot write vitals line", err)
	}
	if s.o.OutDir != "" {
		if err := writeShared(s.o.OutDir, l); err != nil {
			s.warnOnce("cannot write shared vitals files", err)
		}
	}
	return l
}

// track keeps each container cgroup's highest peak and OOM counts, its
// last limit, and when its oom_kill first rose (the first reading that saw
// it above zero), removed cgroups included.
func (s *sampler) track(l record.Line) {
	at := l.Time
	kill := func(f *record.FinalMemory, n uint64) {
		if n > f.OOMKill && f.OOMKillAt == nil {
			f.OOMKillAt = &at
		}
		f.OOMKill = max(f.OOMKill, n)
	}
	for id, m := range l.Containers {
		f := s.containers[id]
		if m.Peak != nil && (f.Peak == nil || *m.Peak > *f.Peak) {
			f.Peak, f.PeakObserved = m.Peak, m.PeakObserved
		}
		if m.Limit != nil || m.Current != nil {
			f.Limit = m.Limit // absent: no limit
		}
		if e := m.Events; e != nil {
			f.OOM = max(f.OOM, e.OOM)
			kill(&f, e.OOMKill)
		}
		s.containers[id] = f
	}
	for id, n := range l.GoneOOMKills {
		f := s.containers[id]
		kill(&f, n)
		s.containers[id] = f
	}
}

// final writes the last line and the termination message.
func (s *sampler) final() error {
	l := s.emit(record.TriggerFinal, false)
	if s.o.TerminationPath == "" {
		return nil
	}
	f := l.Final()
	f.OOMKillAt = s.oomKillAt
	if len(s.containers) > 0 {
		f.Containers = s.containers
		markGone(f.Containers, l)
	}
	f.Stall = s.stalls.last
	b, err := record.EncodeFinal(f)
	if err == nil {
		err = os.WriteFile(s.o.TerminationPath, b, 0o644)
	}
	if err != nil {
		return fmt.Errorf("write final reading to termination message: %w", err)
	}
	return nil
}

// warnOnce logs each distinct failure once, not once per sample.
func (s *sampler) warnOnce(msg string, err error) {
	key := msg + ": " + err.Error()
	var pe *os.PathError
	if errors.As(err, &pe) {
		key = msg + ": " + pe.Op + " " + pe.Err.Error() // temp file names differ each time
	}
	if !s.logged[key] {
		s.logged[key] = true
		s.o.Log.Warn(msg+"; will keep trying", "err", err)
	}
}
