package guard

import "github.com/prometheus/client_golang/prometheus"

// Domain counters; request counts and latencies come from
// controller-runtime's own controller_runtime_webhook_* metrics.
var (
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_guard_decisions_total",
		Help: "Guard decisions on pod deletes and evictions, by operation, decision and the rule that decided.",
	}, []string{"operation", "decision", "rule"})
)

// RegisterMetrics registers the guard's counters on reg (main passes
// controller-runtime's metrics.Registry).
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{decisions} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
