package scale

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The report's own arithmetic, without a cluster (go test ./... runs it).

func TestBucketHoldsTheQuantile(t *testing.T) {
	inf := math.Inf(1)
	h := histogram{0.001: 50, 0.01: 98, 0.1: 100, inf: 100}
	for _, tc := range []struct{ q, lower, upper float64 }{{.5, 0, 0.001}, {.9, 0.001, 0.01}, {.99, 0.01, 0.1}} {
		if lo, up := h.bucket(tc.q); lo != tc.lower || up != tc.upper {
			t.Errorf("bucket(%v) = (%v, %v], want (%v, %v]", tc.q, lo, up, tc.lower, tc.upper)
		}
	}
	if lo, up := (histogram{}).bucket(.5); !math.IsNaN(lo) || !math.IsNaN(up) {
		t.Error("an empty histogram has no bucket")
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

func TestRequestsByPodNameThePodsEventsRecordsNoteAndReads(t *testing.T) {
	lines := `{"auditID":"a","verb":"create","objectRef":{"resource":"runnerdeaths","namespace":"ci","name":"r-1.00ff"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z","responseStatus":{"code":201}}
{"auditID":"b","verb":"create","objectRef":{"resource":"events","namespace":"ci","name":"r-1.18a2b"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z","responseStatus":{"code":201}}
{"auditID":"c","verb":"create","objectRef":{"resource":"runnerdeletions","namespace":"ci","name":"uid-1"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z","responseStatus":{"code":201}}
{"auditID":"d","verb":"get","objectRef":{"resource":"pods","namespace":"ci","name":"r-2"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z"}
{"auditID":"e","verb":"list","objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z"}
{"auditID":"f","verb":"update","objectRef":{"resource":"leases","namespace":"runnerguard","name":"runnerguard-watcher"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z"}
{"auditID":"g","verb":"delete","objectRef":{"resource":"runnerdeaths","namespace":"ci","name":"r-1.00ff"},"requestReceivedTimestamp":"2026-11-23T10:00:02Z"}
{"auditID":"h","verb":"create","objectRef":{"resource":"runnerdeaths","namespace":"ci","name":"r-2.00aa"},"requestReceivedTimestamp":"2026-11-23T10:00:02Z","responseStatus":{"code":409}}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	// g, retention's delete of r-1's record, is not the runner's; h, a
	// create answered AlreadyExists, is a request and no write.
	got, writes, err := requestsByPod(path, from, from.Add(5*time.Second), map[string]string{"uid-1": "ci/r-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got["ci/r-1"] != 3 || got["ci/r-2"] != 2 || len(got) != 2 {
		t.Errorf("got %v: want ci/r-1 3 (record, Event, note), ci/r-2 2 (a GET, a refused create), and neither the list nor the lease", got)
	}
	if len(writes["ci/r-1"]) != 3 || len(writes["ci/r-2"]) != 0 {
		t.Errorf("writes %v: want ci/r-1 3, and the GET and the refused create of ci/r-2 none", writes)
	}
}

func TestBudgetWritesCountCreatesByNamespaceAndDeletes(t *testing.T) {
	// e: a second worker's create, answered AlreadyExists, makes none.
	lines := `{"auditID":"a","verb":"create","objectRef":{"resource":"poddisruptionbudgets","namespace":"ci","name":"runnerguard-busy-runners"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z","responseStatus":{"code":201}}
{"auditID":"b","verb":"create","objectRef":{"resource":"poddisruptionbudgets","namespace":"gl","name":"runnerguard-busy-runners"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z","responseStatus":{"code":201}}
{"auditID":"c","verb":"get","objectRef":{"resource":"poddisruptionbudgets","namespace":"ci","name":"runnerguard-busy-runners"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z","responseStatus":{"code":200}}
{"auditID":"d","verb":"delete","objectRef":{"resource":"poddisruptionbudgets","namespace":"ci","name":"runnerguard-uid"},"requestReceivedTimestamp":"2026-11-23T10:00:01Z","responseStatus":{"code":200}}
{"auditID":"e","verb":"create","objectRef":{"resource":"poddisruptionbudgets","namespace":"gl","name":"runnerguard-busy-runners"},"requestReceivedTimestamp":"2026-11-23T10:00:02Z","responseStatus":{"code":409}}
`
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	creates, deletes, err := budgetWrites(path, from, from.Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if creates["ci"] != 1 || creates["gl"] != 1 || len(creates) != 2 || deletes != 1 {
		t.Errorf("creates %v, deletes %d: want one in ci and gl, one delete", creates, deletes)
	}
}

func TestReadProcReadsThisProcess(t *testing.T) {
	u, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.RSS <= 0 || u.HWM < u.RSS || u.Anon <= 0 || u.Anon > u.RSS || u.CPU < 0 {
		t.Errorf("implausible usage of this very process: %+v", u)
	}
	if _, err := readProc(0); err == nil {
		t.Error("pid 0 (not running) must be an error")
	}
}
