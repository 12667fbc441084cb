package inject

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

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

// count counts req's result, unless req is a dry run: a dry run admits no
// pod, so it counts none.
func count(req admission.Request, r Result) {
	if req.DryRun != nil && *req.DryRun {
		return
	}
	injections.WithLabelValues(string(r)).Inc()
}
