package death

import (
	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// believed is the guard's note when what it says of the pod agrees with
// the pod as the watcher saw it, else nil. A note is written from the
// review's copy of the pod, which anyone on the pod network may post: a
// note that a runner was idle or its job over (a fleet's signal on the
// pod itself, not in a record of its own) is believed only when the pod
// showed that signal at the note's time, and one that the job's owner
// ended it only when it names the pod's recorded creator or an owner
// principal. Otherwise a forged review, posted just before a real
// deletion, would make a drained busy job read as the job's normal end.
func believed(n *v1alpha1.DeletionNote, o Observation) *v1alpha1.DeletionNote {
	if n == nil {
		return nil
	}
	switch rule := runnerpod.Rule(n.Rule); rule {
	case runnerpod.RuleIdle, runnerpod.RuleJobOver:
		if presets.KeepsRecord(o.Runner) {
			return n // the fleet's own record decided: not on the pod
		}
		if free, _ := presets.FreeByJob(o.Pod, o.Runner, runnerpod.JobNotRead, n.Time.Time); free != rule {
			return nil
		}
	case runnerpod.RuleJobOwner:
		if !o.Runner.Preset.NamesOwner(o.Pod, n.Requester) {
			return nil
		}
	case runnerpod.RuleZombie:
		// The leader's word, on the pod as the watcher saw it.
		if _, ok := runnerpod.ZombieOf(o.Pod); !ok {
			return nil
		}
	}
	return n
}
