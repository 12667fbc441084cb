package notify

import (
	"errors"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// The phases of a report (v1alpha1.Report.Phase).
const (
	PhaseSending  = "Sending"
	PhaseRetrying = "Retrying"
	PhaseSent     = "Sent"
	PhaseFailed   = "Failed"
	PhaseSkipped  = "Skipped"
)

// Step is what a report needs next.
type Step int

// The steps.
const (
	// StepNone: the report is over (sent, failed or skipped).
	StepNone Step = iota
	// StepSkip: write it Skipped, with the target's reason.
	StepSkip
	// StepWait: a retry is due later.
	StepWait
	// StepAttempt: claim an attempt on the record, then send (asking the
	// destination first, after an earlier attempt).
	StepAttempt
)

// Next is the step for the destination's report (nil when none is on the
// record yet) and, for StepWait, how long to wait.
func Next(rep *v1alpha1.Report, t Target, now time.Time) (Step, time.Duration) {
	switch {
	case t.Skip != "" && rep == nil:
		return StepSkip, 0
	case t.Skip != "":
		return StepNone, 0
	case rep == nil:
		return StepAttempt, 0
	}
	switch rep.Phase {
	case PhaseSent, PhaseFailed, PhaseSkipped:
		return StepNone, 0
	case PhaseRetrying:
		if rep.NextAttemptAt != nil && rep.NextAttemptAt.After(now) {
			return StepWait, rep.NextAttemptAt.Sub(now)
		}
	}
	return StepAttempt, 0
}

// Claim is the report written before an attempt: Sending, one more
// attempt. A leader that stops before it writes the outcome leaves it
// Sending, so the next attempt asks the destination first.
func Claim(rep *v1alpha1.Report, destination string, now time.Time) v1alpha1.Report {
	c := v1alpha1.Report{Destination: destination}
	if rep != nil {
		c = *rep
	}
	c.Phase, c.Attempts, c.Message = PhaseSending, c.Attempts+1, ""
	c.LastAttemptAt, c.NextAttemptAt = &metav1.Time{Time: now}, nil
	return c
}

// Backoff bounds.
const (
	firstBackoff = 10 * time.Second
	maxBackoff   = 10 * time.Minute
	// limitedWait is GitHub's advice for a secondary rate limit that names
	// no wait: at least a minute.
	limitedWait = time.Minute
	maxMessage  = 1024
)

// Outcome is the claimed report after its attempt: Sent where it went,
// Skipped where the service's answer says it must not go (NotTold), or
// Retrying after the backoff (longer where the service asked), or Failed
// once maxAttempts were made.
func Outcome(claimed v1alpha1.Report, where string, err error, maxAttempts int, now time.Time) v1alpha1.Report {
	o := claimed
	o.NextAttemptAt = nil
	if err == nil {
		o.Phase, o.Where, o.Message = PhaseSent, where, ""
		return o
	}
	o.Message = cut(err.Error(), maxMessage)
	var not *NotTold
	if errors.As(err, &not) {
		o.Phase = PhaseSkipped
		return o
	}
	if int(o.Attempts) >= maxAttempts {
		o.Phase = PhaseFailed
		return o
	}
	o.Phase = PhaseRetrying
	o.NextAttemptAt = &metav1.Time{Time: now.Add(Wait(int(o.Attempts), err))}
	return o
}

// Wait is the pause after a failed attempt: an exponential backoff, or
// the service's asked-for wait when longer; a rate limit that names no
// wait (403 or 429) waits at least a minute.
func Wait(attempts int, err error) time.Duration {
	w := firstBackoff << min(max(attempts-1, 0), 10)
	w = min(w, maxBackoff)
	var f *Failure
	if errors.As(err, &f) {
		if f.After > w {
			w = f.After
		}
		if f.After == 0 && (f.Status == http.StatusForbidden || f.Status == http.StatusTooManyRequests) {
			w = max(w, limitedWait)
		}
	}
	return w
}

// Find is the destination's report on the status, or nil.
func Find(st v1alpha1.RunnerDeathStatus, destination string) *v1alpha1.Report {
	for i := range st.Reports {
		if st.Reports[i].Destination == destination {
			return &st.Reports[i]
		}
	}
	return nil
}

// Set puts the report on the status, in place of the destination's.
func Set(st *v1alpha1.RunnerDeathStatus, rep v1alpha1.Report) {
	if old := Find(*st, rep.Destination); old != nil {
		*old = rep
		return
	}
	st.Reports = append(st.Reports, rep)
}
