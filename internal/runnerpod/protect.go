package runnerpod

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
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

// RunningFor is how long the runner container has been running, from its
// running.startedAt; false when the kubelet has not reported it.
func RunningFor(s Status, now time.Time) (time.Duration, bool) {
	if s.Container == nil {
		return 0, false
	}
	run := s.Container.State.Running
	if run == nil || run.StartedAt.IsZero() {
		return 0, false
	}
	return now.Sub(run.StartedAt.Time).Truncate(time.Second), true
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

// CapPassed reports whether a running runner has run past its preset's
// maxProtected, and for how long it has run.
func CapPassed(s Status, p Preset, now time.Time) (time.Duration, bool) {
	ran, ok := RunningFor(s, now)
	return ran, ok && ran > p.MaxProtected.Duration
}

// DeadlinePassed reports whether the pod's own deadline has come.
func DeadlinePassed(pod *corev1.Pod, now time.Time) (time.Time, bool) {
	end, ok := PodDeadline(pod)
	return end, ok && !now.Before(end)
}

// ProtectionEnds is when a busy runner's protection ends: at its preset's
// cap counted from the runner's start or, when sooner, at the pod's own
// deadline; false when neither is known. CapPassed counts whole seconds
// run past the cap, so at the cap's end itself the runner is still
// protected, for one second more.
func ProtectionEnds(pod *corev1.Pod, s Status, p Preset) (time.Time, bool) {
	var end time.Time
	ok := false
	if s.Container != nil && s.Container.State.Running != nil && !s.Container.State.Running.StartedAt.IsZero() {
		end, ok = s.Container.State.Running.StartedAt.Add(p.MaxProtected.Duration), true
	}
	if dl, known := PodDeadline(pod); known && (!ok || dl.Before(end)) {
		end, ok = dl, true
	}
	return end, ok
}
