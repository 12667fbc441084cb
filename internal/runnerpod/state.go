package runnerpod

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// State is where a pod's runner is in its life.
type State int

const (
	// NotStarted: no status yet, or waiting without ever having run.
	NotStarted State = iota
	// Running: a runner container is running now.
	Running
	// Terminated: the runner ran and ended (and is not running again; it
	// may be waiting to restart in place).
	Terminated
)

func (s State) String() string {
	switch s {
	case Running:
		return "running"
	case Terminated:
		return "terminated"
	default:
		return "not-started"
	}
}

// Status is the state of a pod's runner and the container status it was
// read from (nil when the kubelet has reported none).
type Status struct {
	State     State
	Container *corev1.ContainerStatus
	// Terminated is the runner's last termination: the current state's, or
	// the last state's while it waits to restart. Nil unless Terminated.
	Terminated *corev1.ContainerStateTerminated
}

// RunnerStatus reads the state of the pod's runner containers. With several
// runner containers, one running makes the runner running; otherwise one
// that ran and ended makes it terminated.
func RunnerStatus(pod *corev1.Pod, runners []string) Status {
	var ended Status
	for i := range pod.Status.ContainerStatuses {
		cs := &pod.Status.ContainerStatuses[i]
		if !slices.Contains(runners, cs.Name) {
			continue
		}
		switch {
		case cs.State.Running != nil:
			return Status{State: Running, Container: cs}
		case cs.State.Terminated != nil:
			if ended.Container == nil {
				ended = Status{State: Terminated, Container: cs, Terminated: cs.State.Terminated}
			}
		case cs.LastTerminationState.Terminated != nil:
			if ended.Container == nil {
				ended = Status{State: Terminated, Container: cs, Terminated: cs.LastTerminationState.Terminated}
			}
		}
	}
	if ended.Container != nil {
		return ended
	}
	return Status{State: NotStarted}
}
