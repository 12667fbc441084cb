package death

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// A DisruptionTarget condition says what the control plane set out to take
// the pod down for, not that it did: it stays on a pod whose disruption
// never happened (the guard refused the scheduler's delete of a busy
// runner, and the condition outlives the refusal), and anyone who may
// write pods/status can set one. A condition whose disruption is carried
// out by a deletion counts for the class only when that deletion is what
// ended the runner (ending.disruptionEnded); otherwise the record keeps
// the class of what did, and its basis says the condition was there.

// disruptionLead is how long after its DisruptionTarget condition was set
// the pod's deletion may begin and still be the disruption's: the control
// plane sets the condition and deletes the pod in one step (the
// scheduler's preemption, pod GC, the taint manager, the eviction API).
// A pod removed at once is dated by when the watcher saw it go, which may
// lag behind a loaded API server: the lead leaves room for that, and a
// condition left from a refused disruption is older by the time an
// operator drains.
const disruptionLead = 2 * time.Minute

// disruptionSkew allows for the clocks of the condition's writer and of
// the API server that dated the deletion.
const disruptionSkew = 2 * time.Second

// kubeScheduler is the scheduler's username, who deletes the pods it
// preempts.
const kubeScheduler = "system:kube-scheduler"

// deletingDisruptions are the reasons a deletion carries out, each with
// the principal whose delete the guard's note can name ("": the guard
// never reviews it, its principal being exempt, so no note names it).
var deletingDisruptions = map[string]string{
	reasonPreemption:         kubeScheduler,
	reasonDeletionByPodGC:    "",
	"DeletionByTaintManager": "",
	"EvictionByEvictionAPI":  "",
}

// ending is what the observation knows of the pod's deletion: when it
// began (deleting: it did) and who asked, as the guard's note names them
// ("" when no note does).
type ending struct {
	began    time.Time
	deleting bool
	by       string
}

// endingOf is the pod's deletion as the pod alone shows it.
func endingOf(pod *corev1.Pod) ending {
	began, ok := deletion.Start(pod)
	return ending{began: began, deleting: ok}
}

// endingIn is the pod's deletion as an observation shows it: the guard's
// valid note dates and names it, else the pod, else its removal at goneAt.
func endingIn(pod *corev1.Pod, goneAt time.Time, note *v1alpha1.DeletionNote) ending {
	began, ok := deletion.Began(pod, goneAt, note)
	e := ending{began: began, deleting: ok}
	if note != nil {
		e.by = note.Requester
	}
	return e
}

// disruptionTarget is the pod's true DisruptionTarget condition, or nil.
func disruptionTarget(pod *corev1.Pod) *corev1.PodCondition {
	for i, c := range pod.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// disruptionEnded reports whether the pod's DisruptionTarget condition of
// reason is what ended its runner: the condition is dated, the pod's
// deletion began no earlier than disruptionSkew before it and no later
// than disruptionLead after it, and, where the guard's note names the
// deleter and the reason has a reviewed principal, they are the same.
func (e ending) disruptionEnded(pod *corev1.Pod, reason string) bool {
	return e.disruptionMissed(pod, reason) == ""
}

// disruptionMissed says why the pod's DisruptionTarget condition of reason
// did not end its runner, or "" when it did. A condition of another
// reason, or none, did not: "no such condition".
func (e ending) disruptionMissed(pod *corev1.Pod, reason string) string {
	c := disruptionTarget(pod)
	switch {
	case c == nil || c.Reason != reason:
		return "no such condition"
	case c.LastTransitionTime.IsZero():
		return "the condition is not dated"
	case !e.deleting:
		return "the pod was not deleted"
	}
	after := e.began.Sub(c.LastTransitionTime.Time)
	if after < -disruptionSkew || after > disruptionLead {
		return fmt.Sprintf("its deletion began at %s, %s from the condition", e.began.UTC().Format(time.RFC3339), after.Truncate(time.Second))
	}
	if author := deletingDisruptions[reason]; author != "" && e.by != "" && e.by != author {
		return fmt.Sprintf("its deletion was asked for by %s, not %s", e.by, author)
	}
	return ""
}

// disruptionBasis is what a record says of a DisruptionTarget condition
// that a deletion would carry out but that did not end its runner: that
// it was there, why it did not count, and the refusals on record near it
// (the disruption's own delete or eviction, refused). "" when the pod
// carries none, or it ended the runner.
func disruptionBasis(pod *corev1.Pod, e ending, refused *v1alpha1.Refusals) string {
	c := disruptionTarget(pod)
	if c == nil {
		return ""
	}
	if _, ok := deletingDisruptions[c.Reason]; !ok {
		return ""
	}
	why := e.disruptionMissed(pod, c.Reason)
	if why == "" {
		return ""
	}
	s := fmt.Sprintf("the pod carried DisruptionTarget %s (set at %s), which did not end the runner: %s", c.Reason, c.LastTransitionTime.UTC().Format(time.RFC3339), why)
	if r := refusedNear(refused, c.LastTransitionTime.Time, deletingDisruptions[c.Reason]); r != "" {
		s += "; refused: " + r
	}
	return s
}

// refusedNear lists the refusals on record of the disruption's own
// attempts, made since the condition was set (disruptionSkew before set):
// all of its author's (the scheduler tries its preemption again and
// again), and anyone's within disruptionLead after set.
func refusedNear(refused *v1alpha1.Refusals, set time.Time, author string) string {
	if refused == nil {
		return ""
	}
	var out []string
	from, to := set.Add(-disruptionSkew), set.Add(disruptionLead)
	for _, r := range refused.Entries {
		if r.Warned || r.Last.Time.Before(from) || r.By != author && r.First.Time.After(to) {
			continue
		}
		out = append(out, fmt.Sprintf("%s by %s at %s", r.Verb, r.By, r.First.UTC().Format(time.RFC3339)))
	}
	return strings.Join(out, ", ")
}

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
