package guard

import (
	"cmp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/presets"
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
	// (a running runner of a fleet that keeps a record, ARC's scale sets,
	// after rules 1 to 5), so the handler reads the record only then.
	Job JobSignal
	// OwnerDeleting: the pod's EphemeralRunner is being deleted; ARC deletes
	// the pod itself once the runner's job is over. LookupJob reads both.
	OwnerDeleting bool
	// JobNamed is the job the fleet's record names, when it was read.
	JobNamed  *v1alpha1.Job
	LookupJob func(runnerpod.Runner) JobRecord
	// LookupNode reads the pod's node, for its drain deadline; Decide
	// calls it only for a busy runner (after the override), so the handler
	// reads the Node only then. nil, or a nil Node: no deadline.
	LookupNode func() *corev1.Node
	Now        time.Time
	// Mode is the guard's mode in the pod's namespace: enforce or warn.
	Mode config.Mode
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
	// Term is the runner's protection in time (since when it has run, how
	// long, when and why its protection ends), worked out once for the
	// rules that read it and the text: set from rule 11 on.
	Term runnerpod.Term
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
	// OwnerUnshown says why the requester was not shown to be the owner of
	// a pod whose creator was not recorded (ownerShown); "" otherwise.
	OwnerUnshown string
	// Named is the job the fleet's record named when the guard read it
	// (an ARC runner's EphemeralRunner), whatever the rule: the deletion
	// note keeps it for the record, written after ARC deleted the
	// EphemeralRunner.
	Named *v1alpha1.Job
	// Zombie is the runner's zombie as the leader named it
	// (runnerpod.ZombieAnnotation), nil for none: set from rule zombie on.
	Zombie *runnerpod.Zombie
	// Job is the busy runner's job as its fleet names it (the
	// EphemeralRunner's status, or the pod's job keys), nil when unnamed:
	// set for rule busy only, for the refusal to say.
	Job *v1alpha1.Job
}

// Decide applies the decision table: the first rule that applies decides.
func Decide(f Facts, cfg config.Config) Decision {
	pod := f.Pod
	runner, ok := presets.Match(pod, cfg.Presets)
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
	if presets.KeepsRecord(runner) && f.Job == JobNotRead && f.LookupJob != nil {
		r := f.LookupJob(runner)
		f.Job, f.OwnerDeleting, f.JobNamed = r.Signal, r.OwnerDeleting, r.Job
	}
	d.OwnerDeleting, d.Named = f.OwnerDeleting, f.JobNamed
	if free, why := presets.FreeByJob(pod, runner, f.Job, f.Now); free != "" {
		return allow(free, why)
	}
	if presets.OwnerOf(runner.Preset.Name).EndsJob {
		owner, notTaken := isOwner(pod, f, runner.Preset)
		d.OwnerNotTaken = notTaken
		switch {
		case owner:
			return allow(runnerpod.RuleJobOwner, "the requester owns the job and is ending it")
		case ownerUnknown(pod, runner.Preset):
			shown, how := ownerShown(pod, f, runner.Preset)
			if shown {
				return allow(runnerpod.RuleOwnerUnknown, ownerUnknownMessage(runner.Preset.Name, how))
			}
			d.OwnerUnshown = how
		}
	}
	return decideProtected(f, cfg, d)
}

// decideProtected is rules 8 to 12, for a running runner whose job is not
// known to be over and whose requester is not its owner: the exempt
// principals, the override, the node's drain deadline, the protection's
// cap and the pod's own deadline let it go; else it is busy.
func decideProtected(f Facts, cfg config.Config, d Decision) Decision {
	pod, runner := f.Pod, d.Runner
	if slices.Contains(cfg.Guard.ExemptPrincipals, f.Requester) {
		return allowed(d, runnerpod.RuleExempt, "the requester is exempt")
	}
	if reason, ok := runnerpod.Overridden(pod); ok {
		d.Override = reason
		return allowed(d, runnerpod.RuleOverride, "allowed by "+runnerpod.AllowDelete+": "+reason)
	}
	if z, ok := runnerpod.ZombieOf(pod); ok {
		d.Zombie = &z
		if endsZombie(f, cfg, runner.Preset) {
			return allowed(d, runnerpod.RuleZombie, zombieMessage(f, d))
		}
	}
	if f.LookupNode != nil {
		if nd, passed := runnerpod.NodeDrainPassed(f.LookupNode(), pod, f.Now); passed {
			d.NodeDrain = nd
			return allowed(d, runnerpod.RuleNodeDrain, nodeDrainMessage(pod, nd))
		}
	}
	d.Term = runnerpod.TermOf(pod, d.Status, runner.Preset, f.Now)
	if d.Term.Expired != "" {
		return allowed(d, runnerpod.RuleProtectionExpired, expiredMessage(pod, d))
	}
	d.Job = f.JobNamed
	if d.Job == nil {
		d.Job = runnerpod.JobFromPod(pod, runner.Preset.Job)
	}
	d.Rule, d.Message = runnerpod.RuleBusy, busyMessage(f, d)+whyNotOwner(d)
	if f.Mode == config.ModeWarn {
		// Warn mode: the refusal is said, not done.
		d.Allowed, d.Warned = true, true
	}
	return d
}

// endsZombie reports whether the requester may end a zombie: anyone by
// eviction (the autoscalers and drains, which its dropped marks and budget
// let take its node), and by a delete its fleet's controllers or a reaper
// the operator allows (guard.zombieReapers). Anyone else's delete is
// refused as a busy runner's: a zombie is told by the leader, which a
// reaper's own guess is not.
func endsZombie(f Facts, cfg config.Config, p runnerpod.Preset) bool {
	return f.Operation == Eviction || slices.Contains(p.ControllerPrincipals, f.Requester) || slices.Contains(cfg.Guard.ZombieReapers, f.Requester)
}

// allowed is d allowed by rule r, for the reason msg.
func allowed(d Decision, r runnerpod.Rule, msg string) Decision {
	d.Allowed, d.Rule, d.Message = true, r, msg
	return d
}

// whyNotOwner is "; " and why the requester was not taken as the job's
// owner, or "".
func whyNotOwner(d Decision) string {
	if why := cmp.Or(d.OwnerNotTaken, d.OwnerUnshown); why != "" {
		return "; " + why
	}
	return ""
}
