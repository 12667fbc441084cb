package vitals

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runnerguard/runnerguard/vitals/record"
	"github.com/runnerguard/runnerguard/vitals/stall"
)

func TestTheProbeIsNotReadyWhileAStallIsUnderWay(t *testing.T) {
	p := &Probe{}
	h := start(t, Options{Probe: p})
	ask := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	h.out.next(t)
	// The start line may predate these readings: one line of them first.
	h.r.stallAt(0, 0)
	h.tick(t)
	h.out.next(t)
	code, _ := ask(ProbePath)
	assert.Equal(t, http.StatusOK, code, "ready with no stall")
	n := uint64(stall.Default.Span / interval)
	for i := uint64(1); i <= n; i++ {
		h.r.stallAt(i, 95)
		h.tick(t)
		l := h.out.next(t)
		if i < n {
			code, _ := ask(ProbePath)
			assert.Equal(t, http.StatusOK, code, "a touch of the limit shorter than the span is not a stall")
		} else {
			assert.Equal(t, record.TriggerStall, l.Trigger)
		}
	}
	code, body := ask(ProbePath)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "stalled at the memory limit since 2025-11-22T23:00:05Z (pressure)\n", body)
	// The counters stop rising.
	for range 2 {
		h.tick(t)
		h.out.next(t)
	}
	code, _ = ask(ProbePath)
	assert.Equal(t, http.StatusOK, code, "ready again once the stall ended")
	code, _ = ask("/other")
	assert.Equal(t, http.StatusNotFound, code)
}
