package guard

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// ownerNotTaken is "; " and why a requester named as the job's owner was
// not taken as it, or "": in warn mode the fleet's own cleanup that enforce
// mode would refuse is the operator's to fix before switching.
func ownerNotTaken(d Decision) string {
	if d.OwnerNotTaken == "" {
		return ""
	}
	return "; " + d.OwnerNotTaken
}

func refusedReason(op Operation) string {
	if op == Eviction {
		return "EvictionRefused"
	}
	return "DeleteRefused"
}

// requestedBy is ", requested by who" when who is known.
func requestedBy(who string) string {
	if who == "" {
		return ""
	}
	return ", requested by " + who
}

// ownerNotTakenManager says why a ServiceAccount of the job pod's own
// namespace named as its owner (a manager: GitLab's, Woodpecker's agent,
// Jenkins) is not taken, and the one value that makes the manager pass.
func ownerNotTakenManager(pod *corev1.Pod, f Facts, preset runnerpod.PresetName) string {
	var token string
	switch {
	case f.RequesterPod != "" && !createdFromAPod(pod):
		token = fmt.Sprintf("its token is bound to pod %q, but the pod was created with a token bound to no pod (%s empty): only that token ends its job", f.RequesterPod, runnerpod.CreatedFrom)
	case f.RequesterPod != "":
		token = fmt.Sprintf("its token is bound to pod %q, which runs a job", f.RequesterPod)
	case f.RequesterCredential == "":
		token = "its token is bound to no pod and states no credential id (an impersonated name, or a legacy Secret token, which anyone granted edit there can read)"
	case pod.Annotations[runnerpod.CreatedWith] == "":
		token = fmt.Sprintf("its token is bound to no pod, and the pod was created with no credential id in %s", runnerpod.CreatedWith)
	default:
		token = fmt.Sprintf("its token is bound to no pod and is not the one the pod was created with (%s): a token minted anew", runnerpod.CreatedWith)
	}
	return fmt.Sprintf("%s is named as the job's owner but is a ServiceAccount of the pod's own namespace, which anyone granted edit in %s can impersonate, and %s: "+
		"run the manager with its own pod's token (the default in a pod), or with one token for the whole job (kubectl create token), or as a ServiceAccount of a namespace of its own, "+
		"or accept the risk with presets.%s.ownerInRunnerNamespace: true",
		f.Requester, pod.Namespace, token, preset)
}

// ownerUnknownMessage says why a requester was let end a job whose owner
// was not recorded (rule owner-unknown), and how it was shown to own it.
func ownerUnknownMessage(preset runnerpod.PresetName, how string) string {
	return fmt.Sprintf("the job's owner was not recorded: the pod was created without runnerguard's injector (no %s) and preset %s has no ownerPrincipals; %s",
		runnerpod.CreatedBy, preset, how)
}

// nodeDrainMessage says whose drain deadline let a busy runner go (rule
// node-drain-deadline).
func nodeDrainMessage(pod *corev1.Pod, nd runnerpod.NodeDrain) string {
	return fmt.Sprintf("allowed by node %s's %s %s, set by %s", pod.Spec.NodeName, runnerpod.DrainDeadline, nd.At.UTC().Format(time.RFC3339), nd.By)
}

// zombieMessage says why a zombie's end is allowed (rule zombie): what its
// fleet's evidence shows, since when, and by what right the requester ends
// it.
func zombieMessage(f Facts, d Decision) string {
	z := d.Zombie
	by := "its eviction, which lets its node go"
	if f.Operation == Delete {
		by = "a delete by " + f.Requester + ", its fleet's controller or a reaper the operator allows (guard.zombieReapers)"
	}
	return fmt.Sprintf("runner %q is a zombie, %s since %s (%s ago): %s; it is not busy, and %s ends it",
		d.Status.Container.Name, z.Kind, z.Since.UTC().Format(time.RFC3339), duration.HumanDuration(f.Now.Sub(z.Since).Truncate(time.Second)),
		presets.ZombieMeans(d.Runner, z.Kind), by)
}

// expiredMessage says how a running runner's protection ended (rule
// protection-expired): past its preset's cap, or at the pod's own
// deadline.
func expiredMessage(pod *corev1.Pod, d Decision) string {
	if d.Term.Expired == runnerpod.ExpiredCap {
		return fmt.Sprintf("the protection expired: runner %q has run for %s, past the %s cap of preset %s",
			d.Status.Container.Name, duration.HumanDuration(d.Term.Ran), duration.HumanDuration(d.Runner.Preset.MaxProtected.Duration), d.Runner.Preset.Name)
	}
	dl, _ := runnerpod.PodDeadline(pod)
	return fmt.Sprintf("the protection expired: the pod's own deadline (activeDeadlineSeconds %d from its start at %s) passed at %s",
		*pod.Spec.ActiveDeadlineSeconds, pod.Status.StartTime.UTC().Format(time.RFC3339), dl.UTC().Format(time.RFC3339))
}

// protectionEnds says when the busy runner's protection ends and why; ""
// when neither the cap nor a deadline is known.
func protectionEnds(pod *corev1.Pod, d Decision) (at, why string) {
	t := d.Term
	if t.Ends.IsZero() {
		return "", ""
	}
	return t.Ends.UTC().Format(time.RFC3339), t.EndsWhy(pod, d.Runner.Preset)
}

// jobText names a job as its fleet does: its id, then what else the fleet
// states of it, each quoted, since whoever may update the pod can write
// the pod's job keys.
func jobText(j *v1alpha1.Job) string {
	if j == nil {
		return ""
	}
	id := j.ID
	if id == "" {
		id = j.RequestID
	}
	var parts []string
	if id != "" {
		parts = append(parts, fmt.Sprintf("job %q", id))
	}
	for _, f := range []struct{ what, v string }{{"workflow run", j.Run}, {"name", j.Name}, {"project", j.Project}} {
		if f.v != "" {
			parts = append(parts, fmt.Sprintf("%s %q", f.what, f.v))
		}
	}
	return strings.Join(parts, ", ")
}

// since is when the runner started, as a refusal says it; "" when unknown.
func since(d Decision) string {
	if d.Term.Since.IsZero() {
		return ""
	}
	return d.Term.Since.UTC().Format(time.RFC3339)
}

// OverridePermission is what setting runnerpod.AllowDelete takes: the
// chart's ValidatingAdmissionPolicy checks this verb on this resource in
// the pod's namespace, which its <release>-override ClusterRole grants; a
// reaper that sets the annotation without it meets a second refusal.
const OverridePermission = `the verb "` + runnerpod.OverrideVerb + `" on ` + runnerpod.OverrideResource + "." + runnerpod.OverrideGroup

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
	if s := since(d); s != "" {
		fmt.Fprintf(&b, " has been running for %s (since %s)", duration.HumanDuration(d.Term.Ran), s)
	} else {
		b.WriteString(" is running")
	}
	fleet := presets.Of(d.Runner).Traits()
	switch f.Job {
	case JobAssigned:
		b.WriteString(" with a job assigned")
	case JobUnreadable:
		fmt.Fprintf(&b, " and its %s could not be read (or is not the pod's owner by UID), so it is taken to be busy", fleet.RecordKind)
	default:
		b.WriteString(" and is taken to be busy with a job")
	}
	if j := jobText(d.Job); j != "" {
		fmt.Fprintf(&b, " (%s)", j)
	}
	if f.OwnerDeleting {
		fmt.Fprintf(&b, "; its %s is being deleted: %s", fleet.RecordKind, fleet.RecordDeleted)
	}
	if f.Mode == config.ModeWarn {
		b.WriteString("; removing the pod now loses that job")
	} else {
		b.WriteString("; removing the pod now would lose that job")
	}
	if f.Operation == Eviction && f.Mode != config.ModeWarn {
		b.WriteString("; the eviction will succeed once the job ends")
	}
	if at, why := protectionEnds(pod, d); at != "" {
		fmt.Fprintf(&b, "; its protection expires in %s (%s), at %s", duration.HumanDuration(d.Term.Ends.Sub(f.Now).Truncate(time.Second)), why, at)
	}
	if at, ok := presets.Lease(pod, d.Runner); ok {
		fmt.Fprintf(&b, "; its fleet's lease on the job holds it until %s, unless the fleet renews it", at.UTC().Format(time.RFC3339))
	}
	if _, set := pod.Annotations[runnerpod.AllowDelete]; set {
		fmt.Fprintf(&b, "; the annotation %s is set but empty: a reason is required", runnerpod.AllowDelete)
	}
	if d.Zombie != nil {
		fmt.Fprintf(&b, "; it is a zombie (%s since %s: %s), which its eviction, its fleet's controllers (presets.%s.controllerPrincipals) or a reaper named in guard.zombieReapers may end",
			d.Zombie.Kind, d.Zombie.Since.UTC().Format(time.RFC3339), presets.ZombieMeans(d.Runner, d.Zombie.Kind), d.Runner.Preset.Name)
	}
	annotate := fmt.Sprintf("kubectl annotate pod -n %s %s %s=\"<reason>\"", pod.Namespace, pod.Name, runnerpod.AllowDelete)
	if f.Mode == config.ModeWarn {
		fmt.Fprintf(&b, "; enforce mode would wait for the job to end, unless someone granted %s in %s (%s) first ran: %s", OverridePermission, pod.Namespace, overrideRole, annotate)
	} else {
		fmt.Fprintf(&b, "; let the job finish, or, to drain it deliberately, have someone granted %s in %s (%s) first run: %s", OverridePermission, pod.Namespace, overrideRole, annotate)
	}
	return b.String()
}

// connectBusyMessage says what was refused and who may do it.
func connectBusyMessage(f Facts, container string, d Decision) string {
	pod := f.Pod
	return fmt.Sprintf("runnerguard: refused %s %s %s/%s (%s): its runner container %q is running and taken to be busy with a job, "+
		"which a connection into any container of the pod can reach; only the job's owner, a principal granted the verb \"override\" on runners.runnerguard.io "+
		"in this namespace, or anyone once one has set %s on the pod may %s there",
		f.Operation, connectTarget(f, container, d), pod.Namespace, pod.Name, d.Runner.Preset.Name, d.Status.Container.Name, runnerpod.AllowDelete, f.Operation)
}

// refusalPlan is what a refusal's Event adds for an operator planning the
// drain: since when the runner has run, the job it runs where the fleet
// names one, and when its protection ends; all of it from what Decide read.
func refusalPlan(f Facts, d Decision) string {
	var parts []string
	if s := since(d); s != "" {
		parts = append(parts, "running since "+s)
	}
	if j := jobText(d.Job); j != "" {
		parts = append(parts, j)
	}
	if at, _ := protectionEnds(f.Pod, d); at != "" {
		parts = append(parts, "protection ends at "+at)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}

// eventText is an Event's type, reason and note.
type eventText struct{ Type, Reason, Note string }

// eventOf is the Event of a decision an operator should see: every refusal
// (saying why and what would let it go on), a warn-mode pass, an override,
// a protection that expired, and a job owner nobody can be told to be;
// false for any other.
func eventOf(f Facts, d Decision, startedBy string) (eventText, bool) {
	switch {
	case !d.Allowed && d.OwnerDeleting:
		// Someone else deleted the fleet's record and the fleet is waiting
		// for the job: say who, and tell no one to override on its behalf.
		fleet := presets.Of(d.Runner).Traits()
		return eventText{corev1.EventTypeWarning, refusedReason(f.Operation), fmt.Sprintf("refused %s by %s: runner %q is busy with a job%s; its %s is being deleted%s: %s",
			f.Operation, f.Requester, d.Status.Container.Name, refusalPlan(f, d), fleet.RecordKind, requestedBy(startedBy), fleet.RecordDeleted)}, true
	case !d.Allowed && d.OwnerNotTaken != "":
		// The fleet's own cleanup refused: the operator must change the
		// layout or the preset, which the Event says.
		return eventText{corev1.EventTypeWarning, refusedReason(f.Operation), fmt.Sprintf("refused %s by %s: runner %q is busy%s; %s", f.Operation, f.Requester, d.Status.Container.Name, refusalPlan(f, d), d.OwnerNotTaken)}, true
	case !d.Allowed:
		return eventText{corev1.EventTypeWarning, refusedReason(f.Operation), fmt.Sprintf("refused %s by %s: runner %q is busy%s and its job would be lost; someone granted %s may set %s=\"<reason>\" to drain it deliberately",
			f.Operation, f.Requester, d.Status.Container.Name, refusalPlan(f, d), OverridePermission, runnerpod.AllowDelete)}, true
	case d.Warned:
		return eventText{corev1.EventTypeWarning, refusedReason(f.Operation) + "InWarnMode", fmt.Sprintf("%s by %s allowed in warn mode: runner %q is busy and enforce mode would refuse it%s", f.Operation, f.Requester, d.Status.Container.Name, ownerNotTaken(d))}, true
	case d.Rule == runnerpod.RuleOverride:
		return eventText{corev1.EventTypeNormal, "DeleteOverridden", fmt.Sprintf("%s by %s allowed by %s: %s", f.Operation, f.Requester, runnerpod.AllowDelete, d.Override)}, true
	case d.Rule == runnerpod.RuleNodeDrain:
		return eventText{corev1.EventTypeNormal, "DrainDeadlinePassed", fmt.Sprintf("%s by %s %s", f.Operation, f.Requester, d.Message)}, true
	case d.Rule == runnerpod.RuleProtectionExpired:
		return eventText{corev1.EventTypeWarning, "ProtectionExpired", fmt.Sprintf("%s by %s allowed: %s", f.Operation, f.Requester, d.Message)}, true
	case d.Rule == runnerpod.RuleOwnerUnknown:
		return eventText{corev1.EventTypeWarning, "JobOwnerUnknown", fmt.Sprintf("%s by %s allowed: %s", f.Operation, f.Requester, d.Message)}, true
	}
	return eventText{}, false
}

// warning is what an allowed request's caller is warned of: a busy runner
// deleted by the override or past its node's drain deadline, a protection
// that expired, a refusal warn mode only said; "" for none.
func warning(d Decision) string {
	switch d.Rule {
	case runnerpod.RuleOverride, runnerpod.RuleNodeDrain:
		return "runnerguard: deleting a busy runner pod (" + d.Message + ")"
	case runnerpod.RuleProtectionExpired:
		return "runnerguard: " + d.Message
	case runnerpod.RuleBusy:
		return d.Message
	}
	return ""
}
