package death

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Deaths lists every runner termination the pod's status shows: each runner
// container's current terminated state and, after a restart in place, its
// last one. The same status read twice gives the same records (and keys),
// so resyncs are harmless to whoever remembers keys.
func Deaths(pod *corev1.Pod, runner runnerpod.Runner) []Record {
	var out []Record
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if !slices.Contains(runner.Containers, cs.Name) {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.LastTerminationState.Terminated, cs.State.Terminated} {
			if t != nil {
				out = append(out, New(pod, runner, runnerpod.Status{State: runnerpod.Terminated, Container: cs, Terminated: t}))
			}
		}
	}
	return out
}

// CausedByDeletion reports whether the runner ended after its pod's
// deletion began: the deletion (SIGTERM, then SIGKILL) is what ended it.
// The deletion began a grace period before the deletionTimestamp.
func CausedByDeletion(pod *corev1.Pod, r Record) bool {
	began, ok := deletion.Start(pod)
	return ok && r.FinishedAt != nil && !r.FinishedAt.Time.Before(began)
}
