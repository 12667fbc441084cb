package watch

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/runnerguard/runnerguard/webhook/death"
)

// The watcher is the one writer of these: it counts a death when it creates
// its RunnerDeath, so a resync, a restart or another replica never counts
// it again.
var (
	deathsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_runner_deaths_total",
		Help: "Runner deaths recorded, by namespace and class of death (jobs ended by their owner are counted in runnerguard_runner_jobs_ended_total).",
	}, []string{"namespace", "class"})
	jobsEndedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_runner_jobs_ended_total",
		Help: "Runner pods whose job's owner ended the job by deleting the pod (class job-ended): the fleet's normal work, not deaths.",
	}, []string{"namespace"})
	stuckGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "runnerguard_runner_pods_stuck",
		Help: "Runner pods whose runner container has waited longer than the threshold to start, by namespace and waiting reason.",
	}, []string{"namespace", "reason"})
	recordsCollected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_records_collected_total",
		Help: "RunnerDeath and RunnerDeletion objects removed by retention, by kind.",
	}, []string{"kind"})
)

// RegisterMetrics registers the watcher's metrics on reg.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{deathsTotal, jobsEndedTotal, stuckGauge, recordsCollected} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func countDeath(r death.Record) {
	if death.Class(r.Class) == death.JobEnded {
		jobsEndedTotal.WithLabelValues(r.Namespace).Inc()
		return
	}
	deathsTotal.WithLabelValues(r.Namespace, r.Class).Inc()
}
