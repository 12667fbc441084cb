package guard

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Operation is what the request would do to the pod.
type Operation string

// The guarded operations.
const (
	Delete   Operation = "delete"
	Eviction Operation = "eviction"
)

// JobSignal is what the fleet's own record says of the runner's job: the
// pod-level rules' input, kept in runnerpod with them.
type JobSignal = runnerpod.JobSignal

// Job signals (runnerpod's).
const (
	JobNotRead    = runnerpod.JobNotRead
	JobAssigned   = runnerpod.JobAssigned
	JobNone       = runnerpod.JobNone
	JobUnreadable = runnerpod.JobUnreadable
	JobOver       = runnerpod.JobOver
)

// JobRecord is what the fleet's own record of the runner says: the job
// signal, whether the record is being deleted, and the job it names (nil
// when it names none).
type JobRecord struct {
	Signal        JobSignal
	OwnerDeleting bool
	Job           *v1alpha1.Job
}

// Facts are everything the decision depends on.
type Facts struct {
	// Pod is the pod as a DELETE review's oldObject has it, decoded without
	// what no rule reads (decodePod: no managedFields, volumes, or container
	// fields but names), or as read from the API server for an eviction.
	Pod       *corev1.Pod
	Operation Operation
	// Requester is the username of the request's userInfo.
	Requester string
	// RequesterPod is the pod the requester's ServiceAccount token is bound
	// to: the API server's authentication.kubernetes.io/pod-name extra, ""
	// when the token is bound to no pod or the requester is impersonated
	// (impersonating an extra takes "impersonate" on userextras, which no
	// built-in namespace role grants).
	RequesterPod string
	// RequesterCredential is the credential the request was made with
	// (runnerpod.Credential: its token's JTI), "" when the API server
	// states none.
	RequesterCredential string
	// RequesterPodRunsJob reports whether RequesterPod is a runner pod (a
	// job's own pod) rather than, say, a fleet manager's; nil when unknown.
	// Decide calls it only for a ServiceAccount of the runner pod's own
	// namespace named as a GitLab job's owner.
	RequesterPodRunsJob func() bool
	// Job is the fleet's record of the job when already known; otherwise
	// LookupJob reads it, and Decide calls it only when its answer decides
	// (a running ARC scale-set runner, after rules 1 to 5), so the handler
	// reads the EphemeralRunner only then.
	Job JobSignal
	// OwnerDeleting: the pod's EphemeralRunner is being deleted; ARC deletes
	// the pod itself once the runner's job is over. LookupJob reads both.
	OwnerDeleting bool
	// JobNamed is the job the fleet's record names, when it was read.
	JobNamed  *v1alpha1.Job
	LookupJob func() JobRecord
	// LookupNode reads the pod's node, for its drain deadline; Decide
	// calls it only for a busy runner (after the override), so the handler
	// reads the Node only then. nil, or a nil Node: no deadline.
	LookupNode func() *corev1.Node
	Now        time.Time
	// Mode is the guard's mode in the pod's namespace: enforce or warn.
	Mode config.Mode
	// confirmed: Pod was read from the API server, not taken from the
	// review (an eviction's pod), or found with the review's UID and not
	// terminating before the answer (an allowed deletion's).
	confirmed bool
	// refuted: before the answer, Pod was found not to exist with the
	// review's UID, or its deletion had begun.
	refuted bool
}

// Decision is the guard's answer and what it knew.
type Decision struct {
	Allowed bool
	Rule    runnerpod.Rule
	// Message explains the decision; for a denial it is the text the
	// human running kubectl reads.
	Message string
	Runner  runnerpod.Runner
	Status  runnerpod.Status
	// Override is the reason given in the override annotation (rule 9).
	Override string
	// NodeDrain is the node's drain deadline and its setter (rule
	// node-drain-deadline).
	NodeDrain runnerpod.NodeDrain
	// Ran is how long the runner has run, when its protection expired.
	Ran time.Duration
	// OwnerDeleting: the pod's EphemeralRunner is being deleted (as
	// Facts.OwnerDeleting, read by then if it decided).
	OwnerDeleting bool
	// Warned: a busy runner's delete or eviction allowed only because the
	// guard is in warn mode (Rule is busy).
	Warned bool
	// OwnerNotTaken says why a requester named as the job's owner (its
	// recorded creator or an owner principal) was not taken as it; "" when
	// the requester was not named or was taken.
	OwnerNotTaken string
	// Named is the job the fleet's record named when the guard read it
	// (an ARC runner's EphemeralRunner), whatever the rule: the deletion
	// note keeps it for the record, written after ARC deleted the
	// EphemeralRunner.
	Named *v1alpha1.Job
	// Job is the busy runner's job as its fleet names it (the
	// EphemeralRunner's status, or the pod's job keys), nil when unnamed:
	// set for rule busy only, for the refusal to say.
	Job *v1alpha1.Job
}

// Decide applies the decision table: the first rule that applies decides.
func Decide(f Facts, cfg config.Config) Decision {
	pod := f.Pod
	runner, ok := runnerpod.Match(pod, cfg.Presets)
	if !ok {
		return Decision{Allowed: true, Rule: runnerpod.RuleNotRunnerPod, Message: "not a runner pod"}
	}
	d := Decision{Runner: runner, Status: runnerpod.RunnerStatus(pod, runner.Containers)}
	allow := func(r runnerpod.Rule, msg string) Decision {
		d.Allowed, d.Rule, d.Message = true, r, msg
		return d
	}
	// Rules 2 to 6 depend on the pod alone: runnerpod holds them, for the
	// leader's marker too.
	if free, why := runnerpod.FreeByState(pod, d.Status); free != "" {
		return allow(free, why)
	}
	if runner.Preset.Name == runnerpod.ARCScaleSet && f.Job == JobNotRead && f.LookupJob != nil {
		r := f.LookupJob()
		f.Job, f.OwnerDeleting, f.JobNamed = r.Signal, r.OwnerDeleting, r.Job
	}
	d.OwnerDeleting, d.Named = f.OwnerDeleting, f.JobNamed
	if free, why := runnerpod.FreeByJob(pod, runner.Preset.Name, f.Job); free != "" {
		return allow(free, why)
	}
	if runner.Preset.Name.OwnerEndsJob() {
		owner, notTaken := isOwner(pod, f, runner.Preset)
		d.OwnerNotTaken = notTaken
		switch {
		case owner:
			return allow(runnerpod.RuleJobOwner, "the requester owns the job and is ending it")
		case ownerUnknown(pod, runner.Preset):
			return allow(runnerpod.RuleOwnerUnknown, fmt.Sprintf("the job's owner is unknown: the pod was created without runnerguard's injector (no %s) and preset %s has no ownerPrincipals, so its job is not protected",
				runnerpod.CreatedBy, runner.Preset.Name))
		}
	}
	if slices.Contains(cfg.Guard.ExemptPrincipals, f.Requester) {
		return allow(runnerpod.RuleExempt, "the requester is exempt")
	}
	if reason, ok := runnerpod.Overridden(pod); ok {
		d.Override = reason
		return allow(runnerpod.RuleOverride, "allowed by "+runnerpod.AllowDelete+": "+reason)
	}
	if f.LookupNode != nil {
		if nd, passed := runnerpod.NodeDrainPassed(f.LookupNode(), pod, f.Now); passed {
			d.NodeDrain = nd
			return allow(runnerpod.RuleNodeDrain, fmt.Sprintf("allowed by node %s's %s %s, set by %s",
				pod.Spec.NodeName, runnerpod.DrainDeadline, nd.At.UTC().Format(time.RFC3339), nd.By))
		}
	}
	if ran, passed := runnerpod.CapPassed(d.Status, runner.Preset, f.Now); passed {
		d.Ran = ran
		return allow(runnerpod.RuleProtectionExpired, fmt.Sprintf("the protection expired: runner %q has run for %s, past the %s cap of preset %s",
			d.Status.Container.Name, duration.HumanDuration(ran), duration.HumanDuration(runner.Preset.MaxProtected.Duration), runner.Preset.Name))
	}
	if end, passed := runnerpod.DeadlinePassed(pod, f.Now); passed {
		d.Ran, _ = runnerpod.RunningFor(d.Status, f.Now)
		return allow(runnerpod.RuleProtectionExpired, fmt.Sprintf("the protection expired: the pod's own deadline (activeDeadlineSeconds %d from its start at %s) passed at %s",
			*pod.Spec.ActiveDeadlineSeconds, pod.Status.StartTime.UTC().Format(time.RFC3339), end.UTC().Format(time.RFC3339)))
	}
	d.Job = f.JobNamed
	if d.Job == nil {
		d.Job = fleet.JobFromPod(pod, runner.Preset.Job)
	}
	d.Rule, d.Message = runnerpod.RuleBusy, busyMessage(f, d)
	if d.OwnerNotTaken != "" {
		d.Message += "; " + d.OwnerNotTaken
	}
	if f.Mode == config.ModeWarn {
		// Warn mode: the refusal is said, not done.
		d.Allowed, d.Warned = true, true
	}
	return d
}

// isOwner is rule 7: the requester is the recorded creator, or an owner
// principal of the pod's preset, and is a principal that a namespace editor
// cannot wear. `edit` in the pod's namespace may impersonate any
// ServiceAccount there and mint its tokens, so a ServiceAccount of the pod's
// own namespace is taken as the owner only when it proves more than its
// name:
//   - arc-workflow: the runner that created the workflow pod acts with its
//     own pod's bound token, so the token must be bound to the pod the
//     workflow pod names in its runner-pod label. One job's runner cannot end
//     another's, and an impersonated name (no pod claim) is no owner. A
//     namespace editor can still mint a token bound to that runner pod
//     (TokenRequest with boundObjectRef) or exec into it and read its
//     token: it could already act as that runner.
//   - gitlab: the manager acts with its own pod's bound token, and a job
//     with its build pod's, so the token must be bound to a pod that runs
//     no job, or be the very credential the pod was created with
//     (runnerpod.CreatedWith: a manager outside the cluster, or with a
//     long-lived token, uses the same token for the CREATE and for every
//     exec and delete that follow). An impersonated name (no pod claim, no
//     credential), a token minted anew, or a job running as the manager's
//     ServiceAccount is no owner. A namespace editor can still mint a token
//     bound to the manager's pod, create a pod of that ServiceAccount, exec
//     into the manager, or read a token the manager keeps in a Secret of
//     that namespace: it could already act as the manager. A preset that
//     opts in (ownerInRunnerNamespace) takes the name alone.
//
// When the requester is named but not taken, the second result says why
// and what to change.
func isOwner(pod *corev1.Pod, f Facts, p runnerpod.Preset) (bool, string) {
	requester := f.Requester
	if requester == "" {
		return false, ""
	}
	if pod.Annotations[runnerpod.CreatedBy] != requester && !slices.Contains(p.OwnerPrincipals, requester) {
		return false, ""
	}
	saNamespace, _, err := serviceaccount.SplitUsername(requester)
	if err != nil || saNamespace != pod.Namespace {
		return true, ""
	}
	switch p.Name {
	case runnerpod.ARCWorkflow:
		runner := pod.Labels[runnerpod.ARCWorkflowPodLabel]
		if runner != "" && f.RequesterPod == runner {
			return true, ""
		}
		bound := "is bound to no pod (an impersonated or long-lived token)"
		if f.RequesterPod != "" {
			bound = fmt.Sprintf("is bound to pod %q", f.RequesterPod)
		}
		return false, fmt.Sprintf("%s is named as the job's owner but is a ServiceAccount of the pod's own namespace, which anyone granted edit in %s can act as, and its token %s, not to the workflow pod's runner pod %q (label %s): only that runner, with its own pod's token, ends this job",
			requester, pod.Namespace, bound, runner, runnerpod.ARCWorkflowPodLabel)
	default:
		if p.OwnerInRunnerNamespace {
			return true, ""
		}
		if f.RequesterPod != "" && f.RequesterPodRunsJob != nil && !f.RequesterPodRunsJob() {
			return true, "" // the manager, with its own pod's token
		}
		if f.RequesterPod == "" && sameCredential(pod, f.RequesterCredential) {
			return true, "" // the manager, with the token it created the pod with
		}
		return false, ownerNotTakenGitLab(pod, f, p.Name)
	}
}

// sameCredential: the request was made with the credential the pod was
// created with, as the injector recorded it.
func sameCredential(pod *corev1.Pod, credential string) bool {
	return credential != "" && pod.Annotations[runnerpod.CreatedWith] == credential
}

// ownerNotTakenGitLab says why a ServiceAccount of the build pod's own
// namespace named as its owner is not taken, and the one value that makes
// the manager pass.
func ownerNotTakenGitLab(pod *corev1.Pod, f Facts, preset runnerpod.PresetName) string {
	var token string
	switch {
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

// ownerUnknown: the pod's creator was not recorded (it was created while
// the injector was down, or before runnerguard was installed) and the
// preset names no owner principals. The policy keeps created-by as it was
// at CREATE, so no one can remove it from a pod to make its owner unknown.
func ownerUnknown(pod *corev1.Pod, p runnerpod.Preset) bool {
	_, recorded := pod.Annotations[runnerpod.CreatedBy]
	return !recorded && len(p.OwnerPrincipals) == 0
}

// protectionLeft is how long the busy runner stays protected, when that
// ends (runnerpod.ProtectionEnds: the marker's requeue counts the same) and
// why; false when neither the cap nor a deadline is known.
func protectionLeft(f Facts, d Decision) (time.Duration, time.Time, string, bool) {
	end, ok := runnerpod.ProtectionEnds(f.Pod, d.Status, d.Runner.Preset)
	if !ok {
		return 0, time.Time{}, "", false
	}
	why := "preset cap " + duration.HumanDuration(d.Runner.Preset.MaxProtected.Duration)
	if dl, known := runnerpod.PodDeadline(f.Pod); known && dl.Equal(end) {
		why = fmt.Sprintf("the pod's activeDeadlineSeconds %d", *f.Pod.Spec.ActiveDeadlineSeconds)
	}
	return end.Sub(f.Now).Truncate(time.Second), end, why, true
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

// busySince says since when the runner has run, and when its protection
// ends, for a refusal's reader to plan a drain by: "" for what is unknown.
func busySince(f Facts, d Decision) (since, ends string) {
	if run := d.Status.Container; run != nil && run.State.Running != nil && !run.State.Running.StartedAt.IsZero() {
		since = run.State.Running.StartedAt.UTC().Format(time.RFC3339)
	}
	if _, end, _, ok := protectionLeft(f, d); ok {
		ends = end.UTC().Format(time.RFC3339)
	}
	return since, ends
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
	ran, started := runnerpod.RunningFor(d.Status, f.Now)
	if started {
		since, _ := busySince(f, d)
		fmt.Fprintf(&b, " has been running for %s (since %s)", duration.HumanDuration(ran), since)
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
	if j := jobText(d.Job); j != "" {
		fmt.Fprintf(&b, " (%s)", j)
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
	if left, end, why, ok := protectionLeft(f, d); ok {
		fmt.Fprintf(&b, "; its protection expires in %s (%s), at %s", duration.HumanDuration(left), why, end.UTC().Format(time.RFC3339))
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
