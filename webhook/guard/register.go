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
// With watcher, deaths whose vitals are still to come are left to the pod
// watcher.
func Register(mgr manager.Manager, cfg config.Config, deaths *death.Recorder, watcher bool) {
	h := NewHandler(cfg, mgr.GetAPIReader(), mgr.GetEventRecorder("runnerguard"), deaths)
	h.DeferToWatcher = watcher
	mgr.GetWebhookServer().Register(registration.GuardPath, &admission.Webhook{Handler: h})
}
