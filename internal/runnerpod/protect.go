package runnerpod

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
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

// FreeByJob is rule 6: the fleet's own signal that the runner has no job
// (ARC scale sets: the EphemeralRunner; legacy ARC: its unregistration
// annotation, which only its controller may set).
func FreeByJob(pod *corev1.Pod, preset PresetName, job JobSignal) (Rule, string) {
	switch preset {
	case ARCScaleSet:
		switch job {
		case JobOver:
			return RuleJobOver, "the runner has no job left: ARC removed it from the Actions service, which refuses while a job runs (its EphemeralRunner is being deleted without " + ARCRegistrationFinalizer + ")"
		case JobNone:
			return RuleIdle, "the EphemeralRunner has no job assigned"
		}
	case ARCLegacy:
		if ts, ok := pod.Annotations[ARCLegacyUnregistered]; ok {
			return RuleIdle, "the runner was unregistered at " + ts
		}
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

// Protection is what the guard's pod-level rules say of a runner pod: is
// it protected from every requester the guard does not exempt, and until
// when.
type Protection struct {
	// Busy: the guard refuses its delete and eviction (in enforce mode).
	Busy bool
	// Until is when the protection ends if the runner is still busy then
	// (zero: not known).
	Until time.Time
}

// Protected applies the guard's rules that depend on the pod alone, in
// the guard's order: its state, the fleet's job signal (job as read from
// the fleet's record; JobNotRead for presets without one), the override,
// the cap and the pod's deadline. The guard's rules that depend on the
// requester (the job's owner, exempt principals) are not among them: they
// free a pod for one requester, not for an autoscaler.
func Protected(pod *corev1.Pod, r Runner, job JobSignal, now time.Time) Protection {
	s := RunnerStatus(pod, r.Containers)
	if free, _ := FreeByState(pod, s); free != "" {
		return Protection{}
	}
	if free, _ := FreeByJob(pod, r.Preset.Name, job); free != "" {
		return Protection{}
	}
	if _, ok := Overridden(pod); ok {
		return Protection{}
	}
	if _, passed := CapPassed(s, r.Preset, now); passed {
		return Protection{}
	}
	if _, passed := DeadlinePassed(pod, now); passed {
		return Protection{}
	}
	until, _ := ProtectionEnds(pod, s, r.Preset)
	return Protection{Busy: true, Until: until}
}

// EphemeralRunnerJob is the job signal of an ARC scale-set pod's
// EphemeralRunner er, whose UID the pod's ownerReference names as owner;
// and whether er is being deleted. ARC's listener writes the assigned job
// into its status (jobRequestId; jobId in newer releases); none means idle.
// ARC never clears it after the job, but once the EphemeralRunner's
// deletion began it removes the runner from the Actions service (which
// refuses while the job runs) and only then its registration finalizer: a
// deleting EphemeralRunner without that finalizer says the job is over;
// one that never had a job is idle, being removed or not (scale-down). An
// EphemeralRunner whose UID is not owner (an idle runner of the same name
// recreated, or a reference re-pointed at one) says nothing of the pod's
// job: unreadable, which is busy.
func EphemeralRunnerJob(er *unstructured.Unstructured, owner types.UID) (JobSignal, bool) {
	if er == nil || er.GetUID() != owner {
		return JobUnreadable, false
	}
	deleting := er.GetDeletionTimestamp() != nil
	reqID, _, _ := unstructured.NestedFieldNoCopy(er.Object, "status", "jobRequestId")
	jobID, _, _ := unstructured.NestedString(er.Object, "status", "jobId")
	if jobID == "" && !nonZero(reqID) {
		// Never a job (ARC never clears one): idle, also while its fleet
		// removes it on scale-down; no job is over.
		return JobNone, deleting
	}
	if deleting && !slices.Contains(er.GetFinalizers(), ARCRegistrationFinalizer) {
		return JobOver, true
	}
	return JobAssigned, deleting
}

func nonZero(v any) bool {
	switch n := v.(type) {
	case int64:
		return n != 0
	case float64:
		return n != 0
	case string:
		return n != "" && n != "0"
	}
	return false
}
