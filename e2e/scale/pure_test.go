package scale

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The report's own arithmetic, without a cluster (go test ./... runs it).

func TestQuantileInterpolatesWithinTheBucket(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name string
		h    histogram
		q    float64
		want float64
	}{
		{"empty", histogram{}, .5, math.NaN()},
		{"all in the first bucket", histogram{0.005: 10, 0.01: 10, inf: 10}, .5, 0.0025},
		{"half and half", histogram{0.005: 5, 0.01: 10, inf: 10}, .99, 0.005 + 0.005*(9.9-5)/5},
		{"beyond the last bound", histogram{0.005: 0, 0.01: 0, inf: 4}, .5, 0.01},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.h.quantile(tc.q)
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9) {
				t.Errorf("quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
}

func TestMinusIsWhatTheWindowAdded(t *testing.T) {
	inf := math.Inf(1)
	got := histogram{0.005: 7, inf: 9}.minus(histogram{0.005: 2, inf: 3})
	if got[0.005] != 5 || got.count() != 6 {
		t.Errorf("got %v", got)
	}
}

func TestRequestCountsOnceEachInTheWindowByVerbAndResource(t *testing.T) {
	lines := `{"auditID":"a","verb":"create","objectRef":{"resource":"runnerdeaths"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z"}
{"auditID":"b","verb":"watch","objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z"}
{"auditID":"b","verb":"watch","objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z"}
{"auditID":"c","verb":"create","objectRef":{"resource":"pods","subresource":"eviction"},"requestReceivedTimestamp":"2026-11-23T10:00:02Z"}
{"auditID":"d","verb":"get","requestURI":"/api","requestReceivedTimestamp":"2026-11-23T10:00:02Z"}
{"auditID":"e","verb":"create","objectRef":{"resource":"events"},"requestReceivedTimestamp":"2026-11-23T10:00:09Z"}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	got, err := requestCounts(path, from, from.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"create runnerdeaths": 1, "watch pods": 1, "create pods/eviction": 1, "get /api": 1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: got %d, want %d", k, got[k], n)
		}
	}
}

func TestReadProcReadsThisProcess(t *testing.T) {
	u, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.HWM < u.RSS || u.CPU < 0 {
		t.Errorf("implausible usage of this very process: %+v", u)
	}
	if _, err := readProc(0); err == nil {
		t.Error("pid 0 (not running) must be an error")
	}
}
