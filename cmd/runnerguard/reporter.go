package main

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/notify"
)

// addReporter adds the leader's reporter when a destination is set and a
// namespace or preset opts in: off otherwise.
func addReporter(mgr manager.Manager, cfg config.Config) error {
	if !cfg.Reports.Enabled() {
		return nil
	}
	r := &notify.Reporter{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Config: cfg.Reports,
		Senders: notify.Senders(cfg.Reports, mgr.GetAPIReader(), nil, time.Now), Now: time.Now}
	return r.SetupWithManager(mgr)
}
