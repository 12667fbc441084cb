package guard

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Operation is what the request would do to the pod.
type Operation string

// The guarded operations.
const (
	Delete   Operation = "delete"
	Eviction Operation = "eviction"
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

// Facts are everything the decision depends on.
type Facts struct {
	Pod       *corev1.Pod
	Operation Operation
	// Requester is the username of the request's userInfo.
	Requester string
	// Job is the fleet's record of the job when already known; otherwise
	// LookupJob reads it, and Decide calls it only when its answer decides
	// (a running ARC scale-set runner, after rules 1 to 5), so the handler
	// reads the EphemeralRunner only then.
	Job JobSignal
	// OwnerDeleting: the pod's EphemeralRunner is being deleted; ARC deletes
	// the pod itself once the runner's job is over. LookupJob reads both.
	OwnerDeleting bool
	LookupJob     func() (job JobSignal, ownerDeleting bool)
	Now           time.Time
	// Mode is the guard's mode in the pod's namespace: enforce or warn.
	Mode config.Mode
	// confirmed: Pod was read from the API server, not taken from the
	// review (an eviction's pod).
	confirmed bool
}

// Rule names the row of the decision table that decided.
type Rule string

// The rows of the guard's decision table (docs/concepts/guard.md), in order.
const (
	RuleNotRunnerPod     Rule = "not-runner-pod"
	RuleTerminating      Rule = "terminating"
	RulePodFinished      Rule = "pod-finished"
	RuleNotStarted       Rule = "not-started"
	RuleRunnerTerminated Rule = "runner-terminated"
	RuleIdle             Rule = "idle"
	// RuleJobOver: the fleet's own record says the job is over (ARC removed
	// the runner from the Actions service), so its controller's delete of a
	// runner still shutting down passes: rule 6's other half.
	RuleJobOver  Rule = deletion.RuleJobOver
	RuleJobOwner Rule = deletion.RuleJobOwner
	// RuleOwnerUnknown: a pod of a preset whose owner ends the job was
	// created without the injector (no created-by) and the preset names no
	// owner principals: no one can be told to be the job's owner, so the
	// job is not protected rather than its pod left to leak.
	RuleOwnerUnknown Rule = "owner-unknown"
	RuleExempt       Rule = "exempt-principal"
	RuleOverride     Rule = "override"
	// RuleProtectionExpired: the runner has run past its preset's
	// maxProtected, so it no longer pins its node.
	RuleProtectionExpired Rule = "protection-expired"
	RuleBusy              Rule = deletion.RuleBusy
)

// Decision is the guard's answer and what it knew.
type Decision struct {
	Allowed bool
	Rule    Rule
	// Message explains the decision; for a denial it is the text the
	// human running kubectl reads.
	Message string
	Runner  runnerpod.Runner
	Status  runnerpod.Status
	// Override is the reason given in the override annotation (rule 9).
	Override string
	// Ran is how long the runner has run, when its protection expired.
	Ran time.Duration
	// OwnerDeleting: the pod's EphemeralRunner is being deleted (as
	// Facts.OwnerDeleting, read by then if it decided).
	OwnerDeleting bool
	// Warned: a busy runner's delete or eviction allowed only because the
	// guard is in warn mode (Rule is busy).
	Warned bool
}

// Decide applies the decision table: the first rule that applies decides.
func Decide(f Facts, cfg config.Config) Decision {
	pod := f.Pod
	runner, ok := runnerpod.Match(pod, cfg.Presets)
	if !ok {
		return Decision{Allowed: true, Rule: RuleNotRunnerPod, Message: "not a runner pod"}
	}
	d := Decision{Runner: runner, Status: runnerpod.RunnerStatus(pod, runner.Containers)}
	allow := func(r Rule, msg string) Decision {
		d.Allowed, d.Rule, d.Message = true, r, msg
		return d
	}
	switch {
	case pod.DeletionTimestamp != nil:
		return allow(RuleTerminating, "the pod is already terminating")
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return allow(RulePodFinished, "the pod has finished ("+string(pod.Status.Phase)+")")
	case d.Status.State == runnerpod.NotStarted:
		return allow(RuleNotStarted, "the runner has not started")
	case d.Status.State == runnerpod.Terminated:
		return allow(RuleRunnerTerminated, "the runner has ended")
	}
	if runner.Preset.Name == runnerpod.ARCScaleSet && f.Job == JobNotRead && f.LookupJob != nil {
		f.Job, f.OwnerDeleting = f.LookupJob()
	}
	d.OwnerDeleting = f.OwnerDeleting
	if runner.Preset.Name == runnerpod.ARCScaleSet && f.Job == JobOver {
		return allow(RuleJobOver, "the runner has no job left: ARC removed it from the Actions service, which refuses while a job runs (its EphemeralRunner is being deleted without "+runnerpod.ARCRegistrationFinalizer+")")
	}
	if idle, why := isIdle(pod, runner.Preset.Name, f.Job); idle {
		return allow(RuleIdle, why)
	}
	if runner.Preset.Name.OwnerEndsJob() {
		switch {
		case isOwner(pod, f.Requester, runner.Preset):
			return allow(RuleJobOwner, "the requester owns the job and is ending it")
		case ownerUnknown(pod, runner.Preset):
			return allow(RuleOwnerUnknown, fmt.Sprintf("the job's owner is unknown: the pod was created without runnerguard's injector (no %s) and preset %s has no ownerPrincipals, so its job is not protected",
				runnerpod.CreatedBy, runner.Preset.Name))
		}
	}
	if slices.Contains(cfg.Guard.ExemptPrincipals, f.Requester) {
		return allow(RuleExempt, "the requester is exempt")
	}
	reason := strings.TrimSpace(pod.Annotations[runnerpod.AllowDelete])
	if reason != "" {
		d.Override = reason
		return allow(RuleOverride, "allowed by "+runnerpod.AllowDelete+": "+reason)
	}
	if ran, ok := runningFor(d.Status, f.Now); ok && ran > runner.Preset.MaxProtected.Duration {
		d.Ran = ran
		return allow(RuleProtectionExpired, fmt.Sprintf("the protection expired: runner %q has run for %s, past the %s cap of preset %s",
			d.Status.Container.Name, duration.HumanDuration(ran), duration.HumanDuration(runner.Preset.MaxProtected.Duration), runner.Preset.Name))
	}
	if end, ok := podDeadline(pod); ok && !f.Now.Before(end) {
		d.Ran, _ = runningFor(d.Status, f.Now)
		return allow(RuleProtectionExpired, fmt.Sprintf("the protection expired: the pod's own deadline (activeDeadlineSeconds %d from its start at %s) passed at %s",
			*pod.Spec.ActiveDeadlineSeconds, pod.Status.StartTime.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339)))
	}
	d.Rule, d.Message = RuleBusy, busyMessage(f, d)
	if f.Mode == config.ModeWarn {
		// Warn mode: the refusal is said, not done.
		d.Allowed, d.Warned = true, true
	}
	return d
}

// isIdle is rule 6: the fleet's own signal that the runner has no job.
func isIdle(pod *corev1.Pod, preset runnerpod.PresetName, job JobSignal) (bool, string) {
	switch preset {
	case runnerpod.ARCScaleSet:
		if job == JobNone {
			return true, "the EphemeralRunner has no job assigned"
		}
	case runnerpod.ARCLegacy:
		if ts, ok := pod.Annotations[runnerpod.ARCLegacyUnregistered]; ok {
			return true, "the runner was unregistered at " + ts
		}
	}
	return false, ""
}

// isOwner is rule 7: the recorded creator, or an owner principal of the
// pod's preset.
func isOwner(pod *corev1.Pod, requester string, p runnerpod.Preset) bool {
	if requester == "" {
		return false
	}
	return pod.Annotations[runnerpod.CreatedBy] == requester || slices.Contains(p.OwnerPrincipals, requester)
}

// ownerUnknown: the pod's creator was not recorded (it was created while
// the injector was down, or before runnerguard was installed) and the
// preset names no owner principals. The policy keeps created-by as it was
// at CREATE, so no one can remove it from a pod to make its owner unknown.
func ownerUnknown(pod *corev1.Pod, p runnerpod.Preset) bool {
	_, recorded := pod.Annotations[runnerpod.CreatedBy]
	return !recorded && len(p.OwnerPrincipals) == 0
}

// podDeadline is when the kubelet ends the pod by its own
// activeDeadlineSeconds, counted from the pod's start (GitLab sets it to the
// job's timeout): the job cannot run past it, so its protection ends there.
func podDeadline(pod *corev1.Pod) (time.Time, bool) {
	ads, start := pod.Spec.ActiveDeadlineSeconds, pod.Status.StartTime
	if ads == nil || start == nil || start.IsZero() {
		return time.Time{}, false
	}
	return start.Add(time.Duration(*ads) * time.Second), true
}

// protectionLeft is how long the busy runner stays protected: until its
// preset's cap or, when sooner, the pod's own deadline; false when neither
// is known.
func protectionLeft(f Facts, d Decision) (time.Duration, string, bool) {
	left, why, ok := time.Duration(0), "", false
	if ran, known := runningFor(d.Status, f.Now); known {
		left, why, ok = d.Runner.Preset.MaxProtected.Duration-ran, "preset cap "+duration.HumanDuration(d.Runner.Preset.MaxProtected.Duration), true
	}
	if end, known := podDeadline(f.Pod); known && (!ok || end.Sub(f.Now) < left) {
		left, why, ok = end.Sub(f.Now).Truncate(time.Second), fmt.Sprintf("the pod's activeDeadlineSeconds %d", *f.Pod.Spec.ActiveDeadlineSeconds), true
	}
	return left, why, ok
}

// runningFor is how long the runner container has been running, from its
// running.startedAt; false when the kubelet has not reported it.
func runningFor(s runnerpod.Status, now time.Time) (time.Duration, bool) {
	run := s.Container.State.Running
	if run == nil || run.StartedAt.IsZero() {
		return 0, false
	}
	return now.Sub(run.StartedAt.Time).Truncate(time.Second), true
}

// OverridePermission is what setting runnerpod.AllowDelete takes: the
// chart's ValidatingAdmissionPolicy checks this verb on this resource in
// the pod's namespace, which its <release>-override ClusterRole grants; a
// reaper that sets the annotation without it meets a second refusal.
const OverridePermission = `the verb "` + OverrideVerb + `" on ` + OverrideResource + "." + OverrideGroup

// overrideRole names the chart's ClusterRole that grants it; the release's
// name prefixes it, which the server is not told.
const overrideRole = "the ClusterRole runnerguard-override in a default install"

// busyMessage says what is running, for how long, that removing it loses
// its job, and what a deliberate drain takes; in warn mode, that the
// request was allowed and what enforce mode would have done instead.
func busyMessage(f Facts, d Decision) string {
	pod := f.Pod
	var b strings.Builder
	if f.Mode == config.ModeWarn {
		b.WriteString("runnerguard (warn mode) allowed this; enforce mode would have refused it: ")
	} else {
		b.WriteString("runnerguard: ")
	}
	fmt.Fprintf(&b, "runner container %q of pod %s/%s (%s)", d.Status.Container.Name, pod.Namespace, pod.Name, d.Runner.Preset.Name)
	ran, started := runningFor(d.Status, f.Now)
	if started {
		fmt.Fprintf(&b, " has been running for %s", duration.HumanDuration(ran))
	} else {
		b.WriteString(" is running")
	}
	switch f.Job {
	case JobAssigned:
		b.WriteString(" with a job assigned")
	case JobUnreadable:
		b.WriteString(" and its EphemeralRunner could not be read (or is not the pod's owner by UID), so it is taken to be busy")
	default:
		b.WriteString(" and is taken to be busy with a job")
	}
	if f.OwnerDeleting {
		b.WriteString("; its EphemeralRunner is being deleted: ARC deletes this pod itself once the Actions service accepts the runner's removal, which it does when the job ends")
	}
	if f.Mode == config.ModeWarn {
		b.WriteString("; removing the pod now loses that job")
	} else {
		b.WriteString("; removing the pod now would lose that job")
	}
	if f.Operation == Eviction && f.Mode != config.ModeWarn {
		b.WriteString("; the eviction will succeed once the job ends")
	}
	if left, why, ok := protectionLeft(f, d); ok {
		fmt.Fprintf(&b, "; its protection expires in %s (%s)", duration.HumanDuration(left), why)
	}
	if _, set := pod.Annotations[runnerpod.AllowDelete]; set {
		fmt.Fprintf(&b, "; the annotation %s is set but empty: a reason is required", runnerpod.AllowDelete)
	}
	annotate := fmt.Sprintf("kubectl annotate pod -n %s %s %s=\"<reason>\"", pod.Namespace, pod.Name, runnerpod.AllowDelete)
	if f.Mode == config.ModeWarn {
		fmt.Fprintf(&b, "; enforce mode would wait for the job to end, unless someone granted %s in %s (%s) first ran: %s", OverridePermission, pod.Namespace, overrideRole, annotate)
	} else {
		fmt.Fprintf(&b, "; let the job finish, or, to drain it deliberately, have someone granted %s in %s (%s) first run: %s", OverridePermission, pod.Namespace, overrideRole, annotate)
	}
	return b.String()
}
