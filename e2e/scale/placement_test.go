package scale

import (
	"fmt"
	"strconv"
	"testing"
)

// otherNamespaces hold most other pods; none is opted in.
const otherNamespaces = 10

// otherPlacement says where the i-th other pod goes: one in 32 (3%) in
// an opted-in runner namespace (a listener, a cache, a service the
// runners use: not a runner, so neither webhook acts on it), the rest
// spread over the non-opted-in namespaces.
func otherPlacement(i int, runnerNS []string) string {
	if i%32 == 31 && len(runnerNS) > 0 {
		return runnerNS[(i/32)%len(runnerNS)]
	}
	return fmt.Sprintf("other-%02d", i%otherNamespaces)
}

// ratio is guarded/baseline, "-" when the baseline is 0.
func ratio(g, b float64) string {
	if b == 0 {
		return "-"
	}
	return strconv.FormatFloat(g/b, 'f', 2, 64)
}

func TestOtherPlacementPutsOneIn32InTheRunnerNamespaces(t *testing.T) {
	runnerNS := []string{"fleet-generic", "fleet-gitlab"}
	by := map[string]int{}
	for i := range 3200 {
		by[otherPlacement(i, runnerNS)]++
	}
	if by["fleet-generic"] != 50 || by["fleet-gitlab"] != 50 {
		t.Errorf("runner namespaces got %d and %d of 3200, want 50 each", by["fleet-generic"], by["fleet-gitlab"])
	}
	if len(by) != 2+otherNamespaces {
		t.Errorf("%d namespaces used, want %d: %v", len(by), 2+otherNamespaces, by)
	}
	if got := otherPlacement(31, nil); got != "other-01" {
		t.Errorf("with no runner namespace: %s, want other-01", got)
	}
}

func TestRatioOfNothingIsADash(t *testing.T) {
	for _, tc := range []struct {
		g, b float64
		want string
	}{{3, 2, "1.50"}, {0, 2, "0.00"}, {1, 0, "-"}} {
		if got := ratio(tc.g, tc.b); got != tc.want {
			t.Errorf("ratio(%v, %v) = %s, want %s", tc.g, tc.b, got, tc.want)
		}
	}
}
