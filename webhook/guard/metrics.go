package guard

import (
	"context"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Domain counters; request counts and latencies come from
// controller-runtime's own controller_runtime_webhook_* metrics.
var (
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_guard_decisions_total",
		Help: "Guard decisions on pod deletes and evictions, by operation, decision, the rule that decided and the requester's class (serviceaccount, node, system, user).",
	}, []string{"operation", "decision", "rule", "requester"})
	ownersNotTaken = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_guard_owner_not_taken_total",
		Help: "Deletes and evictions by a principal named as the job's owner (the pod's recorded creator or a preset's ownerPrincipals) that the guard did not take as the owner, refused (enforce) or only warned of (warn): " +
			"the fleet's own cleanup is being refused. The DeleteRefused Event on the pod says what to set: run the manager with its own pod's token or with one token for the whole job, or in a namespace of its own, " +
			"or set presets.<preset>.ownerInRunnerNamespace.",
	}, []string{"preset", "operation", "decision"})
	notesFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "runnerguard_guard_notes_failed_total",
		Help: "Deletion notes the guard could not write while the pod watcher waited for them: those deaths' records name no deleter.",
	})
)

// RegisterMetrics registers the guard's counters on reg (main passes
// controller-runtime's metrics.Registry).
func RegisterMetrics(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{decisions, ownersNotTaken, notesFailed} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// requesterClass is the kind of principal that asked, a bounded label: a
// ServiceAccount (controllers, reapers, CI jobs), a node, another system
// identity, or a person.
func requesterClass(username string) string {
	switch {
	case strings.HasPrefix(username, "system:serviceaccount:"):
		return "serviceaccount"
	case strings.HasPrefix(username, "system:node:"):
		return "node"
	case strings.HasPrefix(username, "system:"):
		return "system"
	}
	return "user"
}

// decisionMetric counts the decision, and a job owner not taken: counted
// once the review's pod is confirmed, so a forged review, one of a pod
// that is missing or has another UID, or a dry run (request.dryRun, or an
// eviction's deleteOptions) moves no count and feeds no alert.
type decisionMetric struct {
	f Facts
	d Decision
}

func decisionMetricOf(j *judged) Effect { return decisionMetric{j.f, j.d} }

func (e decisionMetric) carryOut(context.Context, *Handler, string) {
	f, d := e.f, e.d
	decisions.WithLabelValues(string(f.Operation), decisionLabel(d), string(d.Rule), requesterClass(f.Requester)).Inc()
	if d.OwnerNotTaken != "" && (!d.Allowed || d.Warned) {
		ownersNotTaken.WithLabelValues(string(d.Runner.Preset.Name), string(f.Operation), decisionLabel(d)).Inc()
	}
}

func decisionLabel(d Decision) string {
	if d.Warned {
		return "warn"
	}
	if d.Allowed {
		return "allow"
	}
	return "deny"
}
