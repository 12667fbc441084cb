package recorder

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The watcher is the one writer of these: it counts a death when it creates
// its RunnerDeath, so a resync, a restart or another replica never counts
// it again.
var (
	deathsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_runner_deaths_total",
		Help: "Runner deaths recorded, by namespace and class of death (jobs ended by their owner are counted in runnerguard_runner_jobs_ended_total, idle runners their fleet removed in runnerguard_runner_idle_removed_total).",
	}, []string{"namespace", "class"})
	jobsEndedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_runner_jobs_ended_total",
		Help: "Runner pods whose job's owner ended the job by deleting the pod (class job-ended): the fleet's normal work, not deaths.",
	}, []string{"namespace"})
	idleRemovedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_runner_idle_removed_total",
		Help: "Runner pods their fleet removed while the runner had no job (class idle-removed: ARC's scale-down): neither deaths nor job ends.",
	}, []string{"namespace"})
	recordsWatched = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "runnerguard_records_watched",
		Help: "1 while the leader watches a fleet's own records of its runners' jobs, by kind (ARC's EphemeralRunner: the API server serves them), 0 while it does not: then that fleet's runners are taken as busy, idle ones included, and keep the autoscalers' do-not-disrupt marks.",
	}, []string{"kind"})
	enforceSwitchedOff = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "runnerguard_enforce_switched_off",
		Help: "1 while the operator has switched the enforce registration off (its delete webhook set to Ignore where the chart rendered Fail, or the registration removed): the leader then keeps no budget and no busy mark where it acts.",
	})
	stuckGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "runnerguard_runner_pods_stuck",
		Help: "Runner pods whose runner container has waited longer than the threshold to start, by namespace and waiting reason.",
	}, []string{"namespace", "reason"})
	stallsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_runner_stalls_total",
		Help: "Runner pods seen stalled at their memory limit (their vitals sidecar's readiness probe failing), by namespace: each stall once, Event or not.",
	}, []string{"namespace"})
	stalledGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "runnerguard_runner_pods_stalled",
		Help: "Runner pods stalled at their memory limit now, by namespace.",
	}, []string{"namespace"})
	peakRatio = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "runnerguard_runner_memory_peak_ratio",
		Help:    "The vitals' memory peak over the pod's limit at each recorded runner death (jobs ended by their owner included), by namespace.",
		Buckets: []float64{0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1},
	}, []string{"namespace"})
	recordsCollected = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_records_collected_total",
		Help: "RunnerDeath and RunnerDeletion objects removed by retention, by kind.",
	}, []string{"kind"})
	// Counted by every replica: a follower's gap is what the next leader
	// plans from, so a drop on any replica may be a death never recorded.
	gapDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "runnerguard_gap_removals_dropped_total",
		Help: "Removed runner pods this replica's gap buffer forgot before their hold ended because it was full: if this replica comes to lead, their deaths may go unrecorded.",
	})
)

// RegisterMetrics registers the watcher's metrics on reg.
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{deathsTotal, jobsEndedTotal, idleRemovedTotal, recordsWatched, enforceSwitchedOff, stuckGauge, stallsTotal, stalledGauge, zombiesNamed, zombiesGauge, peakRatio, recordsCollected, gapDropped} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
