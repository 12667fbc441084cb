package inject

import (
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
)

// Path is where the webhook server serves the injector; the chart's
// MutatingWebhookConfiguration names it.
const Path = "/mutate-runner-pod"

// Register serves the injector at Path on mgr's webhook
// server and registers its metrics. Namespaces are read through the
// manager's cached client, as metadata only (the chart grants get, list and
// watch on namespaces), and from the API server when the cache has not seen
// the namespace yet.
func Register(mgr manager.Manager, cfg config.Config) error {
	if err := RegisterMetrics(metrics.Registry); err != nil {
		return fmt.Errorf("registering the injector's metrics: %w", err)
	}
	h := NewHandler(cfg, mgr.GetClient())
	h.Live = mgr.GetAPIReader()
	h.Recorder = mgr.GetEventRecorder("runnerguard")
	mgr.GetWebhookServer().Register(Path, &admission.Webhook{Handler: h})
	return nil
}
