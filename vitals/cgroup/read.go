package cgroup

import (
	"errors"
	"io/fs"
	"math"
	"path"
	"path/filepath"
	"slices"

	"github.com/containerd/cgroups/v3/cgroup1"
	v1stats "github.com/containerd/cgroups/v3/cgroup1/stats"
	"github.com/containerd/cgroups/v3/cgroup2"
	"golang.org/x/sys/unix"

	"github.com/runnerguard/runnerguard/vitals/record"
)

// The files each version's reading comes from. containerd/cgroups reads a
// missing v2 file as 0, so their presence is checked to tell "0" from
// "absent" (memory.peak appeared in Linux 5.19, memory.pressure needs PSI).
var (
	v2Files = []string{"memory.stat", "memory.current", "memory.max", "memory.peak", "memory.events", "memory.pressure"}
	v1Files = []string{"memory.stat", "memory.oom_control", "memory.usage_in_bytes", "memory.max_usage_in_bytes", "memory.failcnt", "memory.limit_in_bytes"}
)

// v1Unlimited: an unlimited v1 cgroup reports a limit near 2^63 (the page
// counter's maximum in bytes, 9223372036854771712 with 4 KiB pages).
const v1Unlimited = 1 << 62

// readV2 reads the cgroup at rel (starting with "/") in the v2 hierarchy.
func readV2(hier, rel string) (record.Memory, []string) {
	missing := unreadable(filepath.Join(hier, rel), v2Files)
	m, err := cgroup2.Load(rel, cgroup2.WithMountpoint(hier))
	if err != nil {
		return record.Memory{}, append(missing, "cgroup")
	}
	st, err := m.StatFiltered(cgroup2.StatMemory | cgroup2.StatMemoryEvents)
	if err != nil {
		return record.Memory{}, addMissing(missing, failedFile(err))
	}
	var mem record.Memory
	// Without memory.stat, containerd/cgroups reads none of the others.
	if slices.Contains(missing, "memory.stat") {
		st.Memory = nil
	}
	ok := func(f string) bool { return !slices.Contains(missing, f) }
	if s := st.Memory; s != nil {
		if ok("memory.current") {
			mem.Current = ptr(s.Usage)
		}
		if ok("memory.max") && s.UsageLimit != math.MaxUint64 {
			mem.Limit = ptr(s.UsageLimit)
		}
		if ok("memory.peak") {
			mem.Peak = ptr(s.MaxUsage)
		}
		if p := s.PSI; p != nil && ok("memory.pressure") {
			mem.Pressure = &record.Pressure{}
			if p.Some != nil {
				mem.Pressure.SomeAvg10, mem.Pressure.SomeAvg60, mem.Pressure.SomeTotal = p.Some.Avg10, p.Some.Avg60, p.Some.Total
			}
			if p.Full != nil {
				mem.Pressure.FullAvg10, mem.Pressure.FullAvg60, mem.Pressure.FullTotal = p.Full.Avg10, p.Full.Avg60, p.Full.Total
			}
		} else {
			// Present but unreadable: PSI switched off (psi=0) answers EOPNOTSUPP.
			missing = addMissing(missing, "memory.pressure")
		}
	}
	if e := st.MemoryEvents; e != nil && ok("memory.events") {
		mem.Events = &record.Events{Low: e.Low, High: e.High, Max: e.Max, OOM: e.Oom, OOMKill: e.OomKill, OOMGroupKill: e.OomGroupKill}
	}
	return mem, missing
}

// readV1 reads the cgroup at rel in the v1 memory hierarchy under root.
func readV1(root, rel string) (record.Memory, []string) {
	var st v1stats.Metrics
	// Without the swap and kernel-memory files, which kernels deprecate
	// and pods do not limit.
	mc := cgroup1.NewMemory(root, cgroup1.IgnoreModules("memsw", "kmem", "kmem.tcp"))
	if err := mc.Stat(rel, &st); err != nil {
		// containerd/cgroups stops at the first file it cannot read.
		missing := unreadable(filepath.Join(root, "memory", rel), v1Files)
		if len(missing) == 0 {
			missing = []string{failedFile(err)}
		}
		return record.Memory{}, missing
	}
	u, oc := st.Memory.Usage, st.MemoryOomControl
	mem := record.Memory{
		Current: ptr(u.Usage), Peak: ptr(u.Max), Failcnt: ptr(u.Failcnt),
		Anon:     ptr(st.Memory.TotalRSS),
		UnderOOM: ptr(oc.UnderOom != 0),
		Events:   &record.Events{OOMKill: oc.OomKill},
	}
	if u.Limit < v1Unlimited {
		mem.Limit = ptr(u.Limit)
	}
	return mem, nil
}

// readState is what readings remember.
type readState struct {
	// peaks keeps, by container id ("" for the pod), the highest
	// memory.current seen, which stands in for memory.peak on kernels
	// without it.
	peaks map[string]uint64
	// kills remembers v1 container OOM kills.
	kills *ledger
}

// read reads the pod cgroup and each container cgroup in it.
func (g Group) read(st readState) record.Line {
	readOne := readV2
	if g.Version == V1 {
		readOne = func(_, rel string) (record.Memory, []string) { return readV1(g.Root, rel) }
	}
	l := record.Line{Cgroup: g.Version}
	l.Pod, l.Missing = readOne(g.Hierarchy(), g.Rel)
	observePeak(&l.Pod, l.Missing, st.peaks, "")
	v1Kills := st.kills.total()
	present := map[string]bool{}
	for _, c := range containers(g.Dir()) {
		present[c.name] = true
		mem, missing := readOne(g.Hierarchy(), path.Join(g.Rel, c.name))
		observePeak(&mem, missing, st.peaks, c.id)
		for _, f := range missing {
			l.Missing = append(l.Missing, short(c.id)+"/"+f)
		}
		if l.Containers == nil {
			l.Containers = map[string]record.Memory{}
		}
		l.Containers[c.id] = mem
		if g.Version == V1 && mem.Events != nil {
			v1Kills = st.kills.note(c.name, mem.Events.OOMKill)
			mem.Events.OOM, _ = st.kills.notified(c.name)
			if l.Pod.UnderOOM != nil {
				*l.Pod.UnderOOM = *l.Pod.UnderOOM || *mem.UnderOOM
			}
		}
	}
	// v1 counts an OOM kill only in the victim's own cgroup (v2's
	// memory.events counts it in every ancestor): add the containers'
	// kills, including those of containers gone since, so the pod reading
	// means the same on both.
	if g.Version == V1 && l.Pod.Events != nil {
		l.Pod.Events.OOMKill += v1Kills
		// v1 has no OOM counter; where the kernel's notification is
		// registered, its OOMs stand for one.
		_, l.Pod.Events.OOM = st.kills.notified("")
	}
	if g.Version == V1 {
		l.GoneOOMKills = st.kills.gone(present)
	}
	return l
}

// observePeak fills Peak from the highest current seen when the kernel has
// no memory.peak, and says so.
func observePeak(mem *record.Memory, missing []string, peaks map[string]uint64, key string) {
	if mem.Peak != nil || mem.Current == nil || !slices.Contains(missing, "memory.peak") {
		return
	}
	peaks[key] = max(peaks[key], *mem.Current)
	mem.Peak, mem.PeakObserved = ptr(peaks[key]), true
}

// unreadable lists the files in dir that this process cannot read.
func unreadable(dir string, files []string) []string {
	var out []string
	for _, f := range files {
		if unix.Access(filepath.Join(dir, f), unix.R_OK) != nil {
			out = append(out, f)
		}
	}
	return out
}

// failedFile names the file an error from containerd/cgroups is about.
func failedFile(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return filepath.Base(pe.Path)
	}
	return "memory.stat"
}

func addMissing(missing []string, f string) []string {
	if slices.Contains(missing, f) {
		return missing
	}
	return append(missing, f)
}

func ptr[T any](v T) *T { return &v }
