package death

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Deaths lists every runner termination the pod's status shows: each runner
// container's current terminated state and, after a restart in place, its
// last one. The same status read twice gives the same records (and keys),
// so resyncs are harmless to whoever remembers keys.
func Deaths(pod *corev1.Pod, runner runnerpod.Runner) []Record {
	return deathsIn(pod, runner, endingOf(pod))
}

// deathsIn is Deaths with the pod's deletion as e knows it.
func deathsIn(pod *corev1.Pod, runner runnerpod.Runner, e ending) []Record {
	if f := presets.Of(runner); f != nil && f.Traits().OneJob {
		return oneJob(pod, runner, e)
	}
	var out []Record
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if !slices.Contains(runner.Containers, cs.Name) {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.LastTerminationState.Terminated, cs.State.Terminated} {
			if t != nil {
				out = append(out, newIn(pod, runner, runnerpod.Status{State: runnerpod.Terminated, Container: cs, Terminated: t}, e))
			}
		}
	}
	return out
}

// oneJob is the one death of a job whose runner containers are its parts
// (fleet.Traits.OneJob): the first part, in the pod's order, that ended
// otherwise than cleanly (the parts after it end because it did), else the
// part that ended last once all ended; none while a part may still run. A
// part's own failure code is the job's result, not a death (JobFailed).
func oneJob(pod *corev1.Pod, runner runnerpod.Runner, e ending) []Record {
	var failed, last *corev1.ContainerStatus
	for _, c := range pod.Spec.Containers {
		if !slices.Contains(runner.Containers, c.Name) {
			continue
		}
		i := slices.IndexFunc(pod.Status.ContainerStatuses, func(cs corev1.ContainerStatus) bool { return cs.Name == c.Name })
		if i < 0 || pod.Status.ContainerStatuses[i].State.Terminated == nil {
			if failed == nil {
				return nil
			}
			continue
		}
		cs := &pod.Status.ContainerStatuses[i]
		if t := cs.State.Terminated; failed == nil && (t.ExitCode != 0 || t.Reason != "Completed") {
			failed = cs
		}
		if last == nil || !cs.State.Terminated.FinishedAt.Before(&last.State.Terminated.FinishedAt) {
			last = cs
		}
	}
	chosen := failed
	if chosen == nil {
		chosen = last
	}
	if chosen == nil {
		return nil
	}
	r := newIn(pod, runner, runnerpod.Status{State: runnerpod.Terminated, Container: chosen, Terminated: chosen.State.Terminated}, e)
	if Class(r.Class) == ErrorExit {
		r.Class = string(JobFailed)
		r.ClassBasis = strings.TrimPrefix(r.ClassBasis+"; "+PartFailedBasis, "; ")
	}
	return []Record{r}
}

// PartFailedBasis is the class basis of a job's part that ended with its
// own failure code.
const PartFailedBasis = "a part of the job (a step, a command) ended with its own failure code, neither a signal nor a kill: the job's result, which its CI service shows"
