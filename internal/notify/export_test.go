package notify

import "github.com/prometheus/client_golang/prometheus"

// FailuresTotal and ReportsTotal are the counters, for the tests.
func FailuresTotal() *prometheus.CounterVec { return failuresTotal }
func ReportsTotal() *prometheus.CounterVec  { return reportsTotal }
