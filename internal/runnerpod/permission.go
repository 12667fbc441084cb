package runnerpod

// The override permission: the verb override on runners.runnerguard.io in
// the pod's namespace. No built-in role grants it (the resource does not
// exist; RBAC does not need it to), so only a binding of the chart's
// <release>-override ClusterRole, or of a role that names it, does. The
// chart's admission policy checks it before anyone may write the override
// annotation, and the connect webhook's matchConditions before an exec.
const (
	OverrideGroup    = "runnerguard.io"
	OverrideResource = "runners"
	OverrideVerb     = "override"
)

// The opt-in permission: the verb opt-in on runners.runnerguard.io for a
// namespace, which the chart's <release>-opt-in ClusterRole grants. The
// chart's namespace policy checks it before anyone may add, change or
// remove the labels that opt the namespace in (EnabledNamespaceLabel
// or whatever the webhooks' selector names) and set its mode
// (ModeLabel): removing the one or setting the other to warn
// would let busy runners there be deleted unreviewed.
const OptInVerb = "opt-in"

// GoneWarning is the guard's warning on a dry-run eviction of a pod that
// does not exist: the proof `runnerguard check` looks for that the guard
// answered. The guard writes it and check reads it, so it lives here,
// below both.
const GoneWarning = "runnerguard: the guard answered: the pod is gone, nothing to judge"
