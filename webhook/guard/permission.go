package guard

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
