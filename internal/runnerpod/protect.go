package runnerpod

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// JobSignal is what the fleet's own record says of the runner's job, for
// presets that keep one (ARC scale sets: the EphemeralRunner's status).
type JobSignal int

// Job signals.
const (
	// JobNotRead: the preset keeps no such record or it was not needed.
	JobNotRead JobSignal = iota
	// JobAssigned: a job is assigned: busy.
	JobAssigned
	// JobNone: no job is assigned: idle.
	JobNone
	// JobUnreadable: the record could not be read: treated as busy.
	JobUnreadable
	// JobOver: the EphemeralRunner is being deleted and ARC has removed its
	// registration finalizer, which it does only after the Actions service
	// accepted RemoveRunner: the job is over, whatever the status says.
	JobOver
)

// FreeByState is rules 2 to 5: what the pod's and its runner's state say,
// before any record of the job is read.
func FreeByState(pod *corev1.Pod, s Status) (Rule, string) {
	switch {
	case pod.DeletionTimestamp != nil:
		return RuleTerminating, "the pod is already terminating"
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return RulePodFinished, "the pod has finished (" + string(pod.Status.Phase) + ")"
	case s.State == NotStarted:
		return RuleNotStarted, "the runner has not started"
	case s.State == Terminated:
		return RuleRunnerTerminated, "the runner has ended"
	}
	return "", ""
}

// Overridden is the override's reason when the pod carries one: a
// deliberate drain, which frees the pod for anyone (the policy lets only
// those granted the override verb set it).
func Overridden(pod *corev1.Pod) (string, bool) {
	reason := strings.TrimSpace(pod.Annotations[AllowDelete])
	return reason, reason != ""
}

// Term is a running runner's protection in time, worked out once for the
// guard's decision, the text a person reads and the marker's requeue:
// since when the runner has run and how long, when its protection ends and
// why, and whether it has.
type Term struct {
	// Since is the runner container's running.startedAt, zero when the
	// kubelet has not reported it; Ran is how long it has run by now, in
	// whole seconds.
	Since time.Time
	Ran   time.Duration
	// Ends is when the protection ends: at the preset's cap counted from
	// Since or, when sooner, at the pod's own deadline (ByDeadline); zero
	// when neither is known.
	Ends       time.Time
	ByDeadline bool
	// Expired says how the protection has ended: ExpiredCap, the runner
	// has run past the cap (whole seconds past it, so at the cap's end
	// itself it is still protected); ExpiredDeadline, the pod's own
	// deadline has come; "" while it holds.
	Expired Expiry
}

// Expiry is how a runner's protection ended.
type Expiry string

// How a protection ends.
const (
	ExpiredCap      Expiry = "cap"
	ExpiredDeadline Expiry = "deadline"
)

// TermOf is the runner's Term under preset p at now.
func TermOf(pod *corev1.Pod, s Status, p Preset, now time.Time) Term {
	var t Term
	if s.Container != nil && s.Container.State.Running != nil && !s.Container.State.Running.StartedAt.IsZero() {
		t.Since = s.Container.State.Running.StartedAt.Time
		t.Ran = now.Sub(t.Since).Truncate(time.Second)
		t.Ends = t.Since.Add(p.MaxProtected.Duration)
		if t.Ran > p.MaxProtected.Duration {
			t.Expired = ExpiredCap
		}
	}
	if dl, known := PodDeadline(pod); known {
		if t.Ends.IsZero() || dl.Before(t.Ends) {
			t.Ends, t.ByDeadline = dl, true
		}
		if t.Expired == "" && !now.Before(dl) {
			t.Expired = ExpiredDeadline
		}
	}
	return t
}

// EndsWhy says what ends the protection at t.Ends, as a person reads it:
// the preset's cap, or the pod's own deadline; "" when t.Ends is unknown.
// The guard's refusals and the eviction responder's status both say it,
// so both say it the same way.
func (t Term) EndsWhy(pod *corev1.Pod, p Preset) string {
	switch {
	case t.Ends.IsZero():
		return ""
	case t.ByDeadline:
		return fmt.Sprintf("the pod's activeDeadlineSeconds %d", *pod.Spec.ActiveDeadlineSeconds)
	}
	return "preset cap " + duration.HumanDuration(p.MaxProtected.Duration)
}

// PodDeadline is when the kubelet ends the pod by its own
// activeDeadlineSeconds, counted from the pod's start (GitLab sets it to the
// job's timeout): the job cannot run past it, so its protection ends there.
func PodDeadline(pod *corev1.Pod) (time.Time, bool) {
	ads, start := pod.Spec.ActiveDeadlineSeconds, pod.Status.StartTime
	if ads == nil || start == nil || start.IsZero() {
		return time.Time{}, false
	}
	return start.Add(time.Duration(*ads) * time.Second), true
}
