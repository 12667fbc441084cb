package runnerpod

// Rule names a row of the guard's decision table (docs/concepts/guard.md):
// the guard's decision, its metric and log, a deletion note and a death
// record all carry it. Each name is defined here once; FreeByState and
// FreeByJob return the pod-level rows, which the leader's marker follows
// too, so a pod is marked busy for the autoscalers exactly when the guard
// protects it.
type Rule string

// The rows, in the guard's order. A deletion note and a record keep them as
// plain strings (the API's fields).
const (
	RuleNotRunnerPod Rule = "not-runner-pod"
	// The pod-level rows (rules 2 to 6).
	RuleTerminating      Rule = "terminating"
	RulePodFinished      Rule = "pod-finished"
	RuleNotStarted       Rule = "not-started"
	RuleRunnerTerminated Rule = "runner-terminated"
	// RuleJobOver: the fleet's own record says the job is over (ARC removed
	// the runner from the Actions service), so its controller's delete of a
	// runner still shutting down passes: rule 6's other half.
	RuleJobOver Rule = "job-over"
	// RuleIdle: the runner had no job (ARC's EphemeralRunner never had one,
	// legacy ARC unregistered it): its fleet removes an idle runner.
	RuleIdle Rule = "idle"
	// RuleJobOwner: the job's owner ended its job.
	RuleJobOwner Rule = "job-owner"
	// RuleOwnerUnknown: a pod of a preset whose owner ends the job was
	// created without the injector (no created-by) and the preset names no
	// owner principals: no one can be told to be the job's owner, so the
	// job is not protected rather than its pod left to leak.
	RuleOwnerUnknown Rule = "owner-unknown"
	RuleExempt       Rule = "exempt-principal"
	RuleOverride     Rule = "override"
	// RuleZombie: the runner is a zombie (ZombieAnnotation: alive, but its
	// fleet's evidence shows it will never run a job), so it is not busy:
	// its eviction passes, so its node can go, and so does a delete by its
	// fleet's controllers or a reaper the operator allows.
	RuleZombie Rule = "zombie"
	// RuleNodeDrain: the pod's node carries a drain deadline (DrainDeadline)
	// that has passed: a platform's own drain ends the job at the time its
	// setter stated; a note's StartedBy names who set it.
	RuleNodeDrain Rule = "node-drain-deadline"
	// RuleProtectionExpired: the runner has run past its preset's
	// maxProtected, so it no longer pins its node.
	RuleProtectionExpired Rule = "protection-expired"
	// RuleBusy: the runner is busy; its deletion is refused, or allowed
	// only in warn mode.
	RuleBusy Rule = "busy"
)
