package drain

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Action is what the drain does with one runner pod now.
type Action string

// The actions.
const (
	// Evict: the guard lets the runner go (idle, finished, never started,
	// or its protection over): evicted at once, so no job lands on it.
	Evict Action = "evict"
	// Wait: the runner is busy with a job; the drain waits for the job to
	// end, or for the deadline.
	Wait Action = "wait"
	// Leaving: the pod is already terminating; the drain waits for it to
	// be gone.
	Leaving Action = "leaving"
)

// Runner is a runner pod on a node being drained, with what its fleet's
// record says of its job (JobNotRead for presets that keep none).
type Runner struct {
	Pod    *corev1.Pod
	Runner runnerpod.Runner
	Signal runnerpod.JobSignal
	// Job is the job as its fleet names it, nil when unnamed.
	Job *v1alpha1.Job
}

// Step is the drain's judgement of one runner pod.
type Step struct {
	Runner
	Action Action
	// Why says why the pod may go now (Evict).
	Why string
	// Since is when the runner container started; zero when unknown.
	Since time.Time
	// Until is when the guard's protection of a busy runner ends by
	// itself (its preset's cap or the pod's own deadline); zero when
	// unknown.
	Until time.Time
}

// Judge is what the drain does with runner r now: the guard's own
// pod-level rules (presets.Protected) decide whether it is busy, so the
// drain evicts only what the guard would let go and waits for the rest
// rather than meet a refusal.
func Judge(r Runner, now time.Time) Step {
	s := Step{Runner: r}
	status := runnerpod.RunnerStatus(r.Pod, r.Runner.Containers)
	if c := status.Container; c != nil && c.State.Running != nil {
		s.Since = c.State.Running.StartedAt.Time
	}
	if r.Pod.DeletionTimestamp != nil {
		s.Action, s.Why = Leaving, "the pod is already terminating"
		return s
	}
	p := presets.Protected(r.Pod, r.Runner, r.Signal, now)
	if p.Busy {
		s.Action, s.Until = Wait, p.Until
		return s
	}
	s.Action, s.Why = Evict, freeWhy(r, status, now)
	return s
}

// freeWhy says why a runner the guard does not protect may go.
func freeWhy(r Runner, status runnerpod.Status, now time.Time) string {
	if free, why := runnerpod.FreeByState(r.Pod, status); free != "" {
		return why
	}
	if free, why := presets.FreeByJob(r.Pod, r.Runner, r.Signal, now); free != "" {
		return why
	}
	if reason, ok := runnerpod.Overridden(r.Pod); ok {
		return "overridden: " + reason
	}
	return "its protection has ended"
}

// Tick is what the drain does at one look at the nodes.
type Tick struct {
	// Evict: runners to evict now.
	Evict []Step
	// End: busy runners whose jobs the deadline ends: the override is set
	// on each, then it is evicted.
	End []Step
	// Waiting: busy runners still waited for, and pods still leaving.
	Waiting []Step
}

// Next sorts the runners' steps into what to do now. deadline is zero when
// the drain has none; once it has come, every busy runner is ended.
func Next(steps []Step, now, deadline time.Time) Tick {
	var t Tick
	due := !deadline.IsZero() && !now.Before(deadline)
	for _, s := range steps {
		switch {
		case s.Action == Evict:
			t.Evict = append(t.Evict, s)
		case s.Action == Wait && due:
			t.End = append(t.End, s)
		default:
			t.Waiting = append(t.Waiting, s)
		}
	}
	return t
}
