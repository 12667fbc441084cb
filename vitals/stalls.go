package vitals

import (
	"maps"
	"slices"
	"time"

	"github.com/runnerguard/runnerguard/vitals/record"
	"github.com/runnerguard/runnerguard/vitals/stall"
)

// stalls judges each cgroup of the pod: the pod's, and each container's,
// whose own limit may be the one reached (on v1 a container's failcnt
// counts only at its own limit).
type stalls struct {
	th     stall.Thresholds
	judges map[string]*stall.Judge // by container id, "" for the pod
	// told is the stall the last line carried, last the last one told in
	// the pod's life (for the final reading).
	told, last *record.Stall
}

func newStalls(th stall.Thresholds) *stalls {
	return &stalls{th: th, judges: map[string]*stall.Judge{}}
}

// observe judges l and returns the stall to put on it: the one under way
// (a container's before the pod's, as it names the limit reached), else
// one that ended at this reading; and whether that is news.
func (s *stalls) observe(l record.Line) (*record.Stall, bool) {
	if slices.Contains(l.Missing, "cgroup") {
		return s.told, false
	}
	var current, ended *record.Stall
	note := func(id string, v stall.Verdict) {
		if v.Stalled != nil && (current == nil || current.Container == "") {
			current = toRecord(id, *v.Stalled, nil)
		}
		if v.Ended != nil && ended == nil {
			ended = toRecord(id, *v.Ended, &v.Ended.Ended)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(l.Containers)) {
		note(id, s.judge(id).Observe(stall.FromMemory(l.Time, l.Containers[id])))
	}
	for id, j := range s.judges {
		if _, ok := l.Containers[id]; !ok && id != "" {
			if st := j.Close(); st != nil && ended == nil {
				ended = toRecord(id, *st, &st.Ended)
			}
			delete(s.judges, id)
		}
	}
	note("", s.judge("").Observe(stall.FromMemory(l.Time, l.Pod)))
	out := current
	if out == nil {
		out = ended
	}
	news := (out == nil) != (s.told == nil) || (out != nil && (out.Began != s.told.Began || out.Ended != nil))
	if out != nil {
		s.last = out
	}
	s.told = current
	return out, news
}

func (s *stalls) judge(id string) *stall.Judge {
	j, ok := s.judges[id]
	if !ok {
		j = stall.New(s.th)
		s.judges[id] = j
	}
	return j
}

func toRecord(id string, st stall.Stall, ended *time.Time) *record.Stall {
	return &record.Stall{Began: st.Began, Ended: ended, WorstFull: st.WorstFull, Basis: st.Basis, Container: id}
}

// markGone marks the container cgroups the final reading l no longer
// found: their figures are from earlier readings.
func markGone(cs map[string]record.FinalMemory, l record.Line) {
	if slices.Contains(l.Missing, "cgroup") {
		return
	}
	for id, m := range cs {
		if _, ok := l.Containers[id]; !ok {
			m.Gone = true
			cs[id] = m
		}
	}
}
