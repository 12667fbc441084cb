//go:build scale

package scale

import (
	"math"
	"time"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// snapshot is both replicas' usage and metrics at one moment.
type snapshot struct {
	at      time.Time
	usage   [2]procUsage
	metrics [2]scraped
	leader  int // index of the replica that leads, or -1
}

// take reads both replicas; a replica that is down reads as zero.
func take(replicas [2]*apitest.Server) snapshot {
	s := snapshot{at: time.Now(), leader: -1}
	for i, r := range replicas {
		if r == nil { // the baseline: no runnerguard
			continue
		}
		s.usage[i], _ = readProc(r.Pid())
		s.metrics[i], _ = scrape(r)
		if s.metrics[i].leader {
			s.leader = i
		}
	}
	return s
}

// webhookWindow is what both replicas' histograms of path gained from a
// to b (the API server calls the replica the webhooks are registered at).
func webhookWindow(a, b snapshot, path string) histogram {
	out := histogram{}
	for i := range 2 {
		for served, h := range b.metrics[i].latency {
			if !apitest.OnPath(served, path) {
				continue
			}
			for le, n := range h.minus(a.metrics[i].latency[served]) {
				out[le] += n
			}
		}
	}
	return out
}

// ms formats seconds as milliseconds.
func ms(s float64) string {
	if math.IsNaN(s) {
		return "-"
	}
	return formatFloat(s*1000, 2) + " ms"
}

// within says which bucket of h holds its q-quantile, in milliseconds: all
// controller-runtime's decade-wide buckets allow saying.
func within(h histogram, q float64) string {
	lo, up := h.bucket(q)
	switch {
	case math.IsNaN(up):
		return "-"
	case math.IsInf(up, 1):
		return "over " + ms(lo)
	}
	return "in (" + formatFloat(lo*1000, 1) + ", " + ms(up) + "]"
}
