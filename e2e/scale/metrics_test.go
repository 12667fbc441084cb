//go:build scale

package scale

import (
	"fmt"
	"math"
	"net/http"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
)

// scraped is what the report reads from one replica's metrics.
type scraped struct {
	leader bool
	// latency by webhook path.
	latency map[string]histogram
	// counters by family name, summed over labels.
	counters map[string]float64
}

// scrape reads a replica's metrics.
func scrape(s *apitest.Server) (scraped, error) {
	out := scraped{latency: map[string]histogram{}, counters: map[string]float64{}}
	resp, err := s.GetMetrics(s.MetricsToken)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return out, err
	}
	for _, m := range fams["leader_election_master_status"].GetMetric() {
		out.leader = out.leader || m.GetGauge().GetValue() == 1
	}
	for _, m := range fams["controller_runtime_webhook_latency_seconds"].GetMetric() {
		path := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "webhook" {
				path = l.GetValue()
			}
		}
		h := out.latency[path]
		if h == nil {
			h = histogram{}
			out.latency[path] = h
		}
		for _, b := range m.GetHistogram().GetBucket() {
			// The text format's +Inf bucket is the sample count, added below.
			if !math.IsInf(b.GetUpperBound(), 1) {
				h[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			}
		}
		h[math.Inf(1)] += float64(m.GetHistogram().GetSampleCount())
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if c := m.GetCounter(); c != nil {
				out.counters[name] += c.GetValue()
			}
		}
	}
	return out, nil
}

// isLeader: the replica's leader_election_master_status is 1.
func isLeader(s *apitest.Server) bool {
	m, err := scrape(s)
	return err == nil && m.leader
}
