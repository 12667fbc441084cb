package cgroup

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/procfs"

	"github.com/runnerguard/runnerguard/vitals/record"
)

// Reader is what the sampling loop needs of a cgroup.
type Reader interface {
	// Read takes one reading. It never fails: what could not be read is
	// named in Line.Missing ("cgroup" while the cgroup is not found).
	// V, Time and Trigger are the caller's to set.
	Read() record.Line
	// Watch returns a channel that receives soon after the OOM counters
	// change (and once when the watch begins), until ctx ends.
	Watch(ctx context.Context) <-chan struct{}
}

// Options say where a pod's cgroup is.
type Options struct {
	// Root is the node's cgroup filesystem mount (--cgroup-root).
	Root string
	// PodUID finds the pod cgroup; Path, when set, is read instead.
	PodUID, Path string
	// Self is the sidecar's own cgroups (procfs.Proc.Cgroups), a hint
	// where the pod cgroup is; may be nil.
	Self []procfs.Cgroup
	// Poll is how often OOM counters are read where they cannot be
	// watched (v1). The default, 250ms, puts an OOM on a line within a
	// quarter second for a CPU cost the sidecar's budget absorbs; a shorter
	// one costs more than it buys (docs/performance has the measurements).
	Poll time.Duration
	Log  *slog.Logger
}

// Pod reads one pod's memory cgroup, finding it on first use and retrying
// on each Read until it is there. Read is for one goroutine.
type Pod struct {
	opts      Options
	group     atomic.Pointer[Group]
	found     chan struct{}
	foundOnce sync.Once
	state     readState
	// logged is shared by Read and the watch.
	logged   map[string]bool
	loggedMu sync.Mutex
	// mode is the OOM watch's (WatchNotified, ...), "" before it starts.
	mode atomic.Pointer[string]
}

var _ Reader = (*Pod)(nil)

// NewPod returns a Reader of the pod cgroup o describes. It does no I/O.
func NewPod(o Options) *Pod {
	if o.Poll <= 0 {
		o.Poll = 250 * time.Millisecond
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Pod{opts: o, found: make(chan struct{}),
		state: readState{peaks: map[string]uint64{}, kills: &ledger{}}, logged: map[string]bool{}}
}

// Read implements Reader.
func (p *Pod) Read() record.Line {
	g := p.group.Load()
	if g == nil {
		found, err := Find(p.opts.Root, p.opts.PodUID, p.opts.Path, p.opts.Self)
		if err != nil {
			if p.once("find: " + err.Error()) {
				p.opts.Log.Warn("pod cgroup not found; retrying at each sample", "err", err)
			}
			return record.Line{Missing: []string{"cgroup"}}
		}
		g = &found
		p.group.Store(g)
		p.foundOnce.Do(func() { close(p.found) })
		p.opts.Log.Info("pod cgroup found", "cgroup", g.Version, "dir", g.Dir())
	}
	l := g.read(p.state)
	if m := p.mode.Load(); m != nil {
		l.OOMWatch = *m
	}
	var fresh []string
	for _, f := range l.Missing {
		if p.once("missing: " + f) {
			fresh = append(fresh, f)
		}
	}
	if len(fresh) > 0 {
		p.opts.Log.Warn("cgroup files missing or unreadable; readings leave them out", "dir", g.Dir(), "files", fresh)
	}
	return l
}

// once reports whether key is new, so each condition is logged once.
func (p *Pod) once(key string) bool { return p.onceSync(key) }

func (p *Pod) onceSync(key string) bool {
	p.loggedMu.Lock()
	defer p.loggedMu.Unlock()
	if p.logged[key] {
		return false
	}
	p.logged[key] = true
	return true
}

func (p *Pod) setMode(m string) {
	if old := p.mode.Swap(&m); old == nil || *old != m {
		p.opts.Log.Info("OOM watch", "mode", m)
	}
}

// Watch implements Reader: inotify on v2's memory.events; on v1 the
// kernel's OOM notification on each container cgroup where it can be
// registered, beside a poll of the memory.oom_control files every
// Options.Poll (v2's memory.events is polled too when inotify fails). It
// starts once Read has found the cgroup; lines name the mode from then on.
func (p *Pod) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	go func() {
		select {
		case <-p.found:
		case <-ctx.Done():
			return
		}
		g := *p.group.Load()
		if g.Version == V1 {
			p.watchV1(ctx, g, ch)
			return
		}
		counts := v2Counts(g)
		p.setMode(WatchInotify)
		if err := watchFile(ctx, g.Dir()+"/memory.events", counts, ch); err != nil {
			p.opts.Log.Warn("cannot watch memory.events; polling it instead", "err", err, "every", p.opts.Poll)
			p.setMode(WatchPolled)
			poll(ctx, p.opts.Poll, counts, ch)
		}
	}()
	return ch
}
