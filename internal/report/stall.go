package report

import (
	"fmt"
	"time"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/vitals/stall"
)

// stallLead is the line `why` leads with when the runner died stalled at
// its memory limit: what the job lived through before the class's ending.
func stallLead(r death.Record) string {
	s := r.Stall
	if s == nil {
		return ""
	}
	whose := map[string]string{
		death.ScopeContainer: "its",
		death.ScopePod:       "the pod's",
		death.ScopeSibling:   "another container's",
	}[s.Scope]
	if whose == "" {
		whose = "a"
	}
	limit := " memory"
	if s.Limit != nil {
		limit = " " + bytesHuman(*s.Limit)
	}
	out := fmt.Sprintf("the runner spent its last %s stalled at %s%s limit", spell(s.For.Duration), whose, limit)
	if s.WorstPressure != nil {
		out += fmt.Sprintf(" (every task waiting on memory up to %d%% of the time)", *s.WorstPressure)
	}
	out += fmt.Sprintf(", from %s", s.Began.UTC().Format(time.RFC3339))
	switch s.Basis {
	case stall.BasisFailcnt:
		out += "; judged on cgroup v1 from failing charges with its memory full, a weaker sign than v2's pressure"
	case stall.BasisUnderOOM:
		out += "; the kernel held it under OOM with its OOM killer disabled (cgroup v1)"
	}
	return out + "\n  raise its memory limit, or move the job to a bigger lane\n"
}

// spell says a duration in words ("9 minutes", "45 seconds").
func spell(d time.Duration) string {
	switch {
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours", int(d.Hours()))
	case d >= 2*time.Minute:
		return fmt.Sprintf("%d minutes", int(d.Minutes()))
	default:
		return fmt.Sprintf("%d seconds", int(d.Seconds()))
	}
}

// bytesHuman says a byte count in the largest binary unit it reaches
// ("8 GiB", "1.5 GiB", "96 MiB").
func bytesHuman(n int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n < u.size {
			continue
		}
		if n%u.size == 0 {
			return fmt.Sprintf("%d %s", n/u.size, u.name)
		}
		return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
	}
	return fmt.Sprintf("%d bytes", n)
}

// peakUnknown is what `why` says of a v1 peak that was never read.
func peakUnknown(m v1alpha1.Memory) string {
	if !m.PeakUnknown {
		return ""
	}
	return " peak unknown (the cgroup was removed between the sidecar's last reading and the OOM kill; the kill came at its limit)"
}
