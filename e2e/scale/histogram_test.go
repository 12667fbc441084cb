package scale

import (
	"math"
	"sort"
)

// histogram is one webhook's latency histogram: cumulative counts by upper
// bound, so two scrapes subtract.
type histogram map[float64]float64

// minus is h - base, bucket by bucket: what a window added.
func (h histogram) minus(base histogram) histogram {
	out := histogram{}
	for le, n := range h {
		out[le] = n - base[le]
	}
	return out
}

// count is how many observations h holds.
func (h histogram) count() float64 { return h[math.Inf(1)] }

// bucket is the bucket (lower, upper] that holds the q-quantile; upper is
// +Inf past the last bound, and both are NaN when h is empty.
func (h histogram) bucket(q float64) (lower, upper float64) {
	total := h.count()
	if total == 0 {
		return math.NaN(), math.NaN()
	}
	bounds := make([]float64, 0, len(h))
	for le := range h {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	for _, le := range bounds {
		if h[le] >= q*total {
			return lower, le
		}
		lower = le
	}
	return lower, math.Inf(1)
}
