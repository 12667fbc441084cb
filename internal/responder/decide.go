package responder

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// HeartbeatEvery is how often runnerguard says it still holds a busy
// runner: a few times within the controller's heartbeat deadline, past
// which it passes the turn on, so one lost write does not cost the job,
// and no more often than the API asks responders to write.
const HeartbeatEvery = 3 * time.Minute

// MaxMessage is the longest message the API keeps.
const MaxMessage = 4000

// Runner is the leader's judgement of an Eviction's target pod now.
type Runner struct {
	// Gone: the pod is gone, the name is another pod's now, or it is no
	// runner pod the leader watches.
	Gone bool
	// Busy: the guard protects the runner; Held says so to a person.
	Busy bool
	Held Holding
	// Free says why the guard lets the runner go, when it is not busy.
	Free string
}

// Input is what Decide needs: the Eviction, its target's judgement, and
// the time.
type Input struct {
	Eviction *Eviction
	Runner   Runner
	Now      time.Time
}

// Answer is what runnerguard does with one Eviction now.
type Answer struct {
	// Write is its own account to apply to the Eviction's status; nil:
	// nothing to write.
	Write *ResponderStatus
	// Again is when to look again though nothing changes (the heartbeat
	// falls due); zero: only on a change.
	Again time.Duration
	// Let: runnerguard lets the runner go now, which the death record
	// names; Held is how long it held the busy runner first (zero: it let
	// it go at once).
	Let  bool
	Held time.Duration
	// Withdrawn: every requester withdrew while runnerguard answered; the
	// runner stays, and its record must not name the request.
	Withdrawn bool
}

// Decide is runnerguard's answer to an Eviction of a runner pod. It acts
// only while the controller has made it the active responder. A runner the
// guard lets go (idle, finished, its protection over) is let go at once,
// by completing, so the next responder (the default evictor) evicts it; a
// busy runner is held with a heartbeat and a message until the guard lets
// it go, which its job's end or its protection's end brings. A canceled
// turn is over: nothing to undo, since holding changed nothing.
func Decide(in Input) Answer {
	e := in.Eviction
	own := e.Own()
	switch e.Turn() {
	case Canceled:
		return Answer{Withdrawn: true}
	case Active:
	default:
		return Answer{}
	}
	if own == nil || own.StartTime == nil || own.CompletionTime != nil {
		// The controller has not started the turn yet (its next update
		// brings the start), or the answer is given.
		return Answer{}
	}
	// The API refuses a time before the turn's start; clocks differ.
	now := in.Now
	if now.Before(own.StartTime.Time) {
		now = own.StartTime.Time
	}
	at := metav1.NewTime(now.Truncate(time.Second))
	w := ResponderStatus{Name: Name, StartTime: own.StartTime, HeartbeatTime: &at}
	if in.Runner.Gone || !in.Runner.Busy {
		msg := limit(freeMessage(e, in.Runner))
		w.ExpectedCompletionTime, w.CompletionTime, w.Message = &at, &at, &msg
		var held time.Duration
		if own.HeartbeatTime != nil {
			held = at.Sub(own.StartTime.Time)
		}
		return Answer{Write: &w, Let: true, Held: held}
	}
	msg := limit(in.Runner.Held.Message(in.Now))
	w.Message = &msg
	if u := in.Runner.Held.Until; u.After(now) {
		w.ExpectedCompletionTime = &metav1.Time{Time: u.Truncate(time.Second)}
	}
	due := own.HeartbeatTime == nil || !now.Before(own.HeartbeatTime.Add(HeartbeatEvery)) ||
		!timesEqual(own.ExpectedCompletionTime, w.ExpectedCompletionTime)
	if !due {
		return Answer{Again: own.HeartbeatTime.Add(HeartbeatEvery).Sub(now)}
	}
	return Answer{Write: &w, Again: HeartbeatEvery}
}

func timesEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

func limit(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	return strings.ToValidUTF8(s[:MaxMessage], "")
}

// freeMessage says why runnerguard lets the runner go.
func freeMessage(e *Eviction, r Runner) string {
	name := ""
	if p := e.Spec.Target.Pod; p != nil {
		name = e.Namespace + "/" + p.Name
	}
	if r.Gone {
		return fmt.Sprintf("runnerguard: holds no runner in pod %s (it is gone, or no runner pod runnerguard watches)", name)
	}
	return fmt.Sprintf("runnerguard: lets runner pod %s go: %s", name, r.Free)
}

// Holding is a busy runner as runnerguard describes it to a drainer: the
// guard's own term (runnerpod.Term) and the end of its protection as the
// leader's marker computes it (the cap, the pod's deadline, the fleet's
// lease or the node's drain deadline, whichever comes first).
type Holding struct {
	Pod       *corev1.Pod
	Container string
	Preset    runnerpod.Preset
	Term      runnerpod.Term
	Job       *v1alpha1.Job
	// Until is when the protection ends by itself, zero when unknown; Why
	// says what ends it.
	Until time.Time
	Why   string
}

// UntilWhy says what ends a busy runner's protection at until: the node's
// drain deadline when it is that, the guard's own term's end (the cap or
// the pod's deadline) when it is that, else the fleet's lease on the job,
// the only other thing that brings it sooner.
func UntilWhy(pod *corev1.Pod, p runnerpod.Preset, t runnerpod.Term, until time.Time, node *runnerpod.NodeDrain) string {
	switch {
	case until.IsZero():
		return ""
	case node != nil && until.Equal(node.At):
		return fmt.Sprintf("node %s's drain deadline (%s), set by %s", pod.Spec.NodeName, runnerpod.DrainDeadline, node.By)
	case until.Equal(t.Ends):
		return t.EndsWhy(pod, p)
	}
	return "its fleet's lease on the job"
}

// Message is what a drainer reads in the Eviction while runnerguard holds
// the runner: which job, how long it has run, and when it goes at the
// latest.
func (h Holding) Message(now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "runnerguard: runner container %q of pod %s/%s (%s) is busy", h.Container, h.Pod.Namespace, h.Pod.Name, h.Preset.Name)
	if j := drain.JobText(h.Job); j != "-" {
		fmt.Fprintf(&b, " with job %s", j)
	}
	if !h.Term.Since.IsZero() {
		fmt.Fprintf(&b, ", running for %s (since %s)", duration.HumanDuration(now.Sub(h.Term.Since)), h.Term.Since.UTC().Format(time.RFC3339))
	}
	b.WriteString("; the eviction waits for the job to end")
	if !h.Until.IsZero() {
		fmt.Fprintf(&b, ", or for its protection to end at %s (in %s: %s), whichever comes first",
			h.Until.UTC().Format(time.RFC3339), duration.HumanDuration(h.Until.Sub(now).Truncate(time.Second)), h.Why)
	}
	return b.String()
}
