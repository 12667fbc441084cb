package main

import (
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/recorder"
)

// addReporter adds the leader's reporter when a destination is set and a
// namespace or preset opts in: off otherwise.
func addReporter(mgr manager.Manager, cfg config.Config, senders map[string]notify.Sender) error {
	if !cfg.Reports.Enabled() {
		return nil
	}
	r := &notify.Reporter{Reader: mgr.GetAPIReader(), Client: mgr.GetClient(), Config: cfg.Reports, Senders: senders, Now: time.Now}
	return r.SetupWithManager(mgr)
}

// jobsOver asks the CI services reports go to whether busy runners' jobs
// have ended (recorder.JobsOver); nil where reports go to neither GitHub
// nor GitLab.
func jobsOver(cfg config.Config, senders map[string]notify.Sender, w *recorder.Watcher, o serveOptions) *recorder.JobsOver {
	r := cfg.Reports
	if !r.Enabled() || (r.GitHub == nil && r.GitLab == nil) {
		return nil
	}
	askers := map[string]notify.JobAsker{}
	for dest, s := range senders {
		if a, ok := s.(notify.JobAsker); ok {
			askers[dest] = a
		}
	}
	return &recorder.JobsOver{Reports: r, Askers: askers, Job: w.JobOf, Every: o.jobOverEvery, Grace: o.jobOverGrace, PerSecond: 1, Now: time.Now}
}
