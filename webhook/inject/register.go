package inject

import (
	"fmt"

	"k8s.io/client-go/discovery"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/printable"
	"github.com/runnerguard/runnerguard/internal/responder"
)

// Path is where the webhook server serves the injector; the chart's
// MutatingWebhookConfiguration names it.
const Path = "/mutate-runner-pod"

// Register serves the injector at Path on mgr's webhook
// server and registers its metrics. Namespaces are read through the
// manager's cached client, as metadata only (the chart grants get, list and
// watch on namespaces), and from the API server when the cache has not seen
// the namespace yet. The API server's version is read once, here, to know
// whether it keeps pod-level resources, and its APIs once, to know whether
// it runs eviction requests; a server upgraded past 1.34, or with the
// EvictionRequestAPI gate turned on, is seen at the injector's next start.
func Register(mgr manager.Manager, cfg config.Config) error {
	if err := RegisterMetrics(metrics.Registry); err != nil {
		return fmt.Errorf("registering the injector's metrics: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("connecting to the API server for its version: %w", err)
	}
	sv, err := dc.ServerVersion()
	if err != nil {
		return fmt.Errorf("reading the API server's version: %w", err)
	}
	dropped, err := PodResourcesDropped(sv)
	if err != nil {
		return err
	}
	served := responder.ServedBy(dc)
	logf.Log.WithName("inject").Info("API server", "version", sv.GitVersion, "podResourcesDropped", dropped, "evictionRequests", served)
	h := NewHandler(cfg, mgr.GetClient())
	h.PodResourcesDropped = dropped
	h.EvictionResponder = served
	h.Live = mgr.GetAPIReader()
	h.Recorder = printable.Recorder(mgr.GetEventRecorder("runnerguard"))
	mgr.GetWebhookServer().Register(Path, &admission.Webhook{Handler: h})
	return nil
}
