package guard

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func testutilCount(t *testing.T, class string) float64 {
	t.Helper()
	return testutil.ToFloat64(deaths.WithLabelValues(class))
}
