package guard

import (
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/death"
	"github.com/runnerguard/runnerguard/webhook/registration"
)

// Register serves the guard at registration.GuardPath on mgr's webhook
// server. It reads through the API reader, not the cache: evictions are rare
// and must see the pod as it is now.
func Register(mgr manager.Manager, cfg config.Config, deaths *death.Recorder) {
	h := NewHandler(cfg, mgr.GetAPIReader(), mgr.GetEventRecorder("runnerguard"), deaths)
	mgr.GetWebhookServer().Register(registration.GuardPath, &admission.Webhook{Handler: h})
}
