package inject

import "github.com/prometheus/client_golang/prometheus"

// injections counts pod CREATEs by result; request counts and latencies
// come from controller-runtime's own controller_runtime_webhook_* metrics.
var injections = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "runnerguard_inject_total",
	Help: "Pod creations seen by the injector, by result (injected, no-sidecar, opted-out, not-runner, mirror, unchanged, error).",
}, []string{"result"})

// RegisterMetrics registers the injector's counter on reg. Register calls
// it with controller-runtime's metrics.Registry.
func RegisterMetrics(reg prometheus.Registerer) error {
	return reg.Register(injections)
}

func count(r Result) { injections.WithLabelValues(string(r)).Inc() }
