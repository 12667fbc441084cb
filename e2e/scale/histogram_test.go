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

// quantile estimates the q-quantile as Prometheus's histogram_quantile
// does: linear within the bucket that holds it.
func (h histogram) quantile(q float64) float64 {
	total := h.count()
	if total == 0 {
		return math.NaN()
	}
	bounds := make([]float64, 0, len(h))
	for le := range h {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	rank, lower, below := q*total, 0.0, 0.0
	for _, le := range bounds {
		if h[le] >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			inBucket := h[le] - below
			if inBucket == 0 {
				return le
			}
			return lower + (le-lower)*(rank-below)/inBucket
		}
		lower, below = le, h[le]
	}
	return lower
}
