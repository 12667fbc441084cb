package registration

import (
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The override permission: the verb override on runners.runnerguard.io in
// the pod's namespace. No built-in role grants it (the resource does not
// exist, RBAC does not need it to), so only a binding of the chart's
// ClusterRole OverrideRole(name), or of a role that names it, does.
const (
	OverrideGroup    = "runnerguard.io"
	OverrideResource = "runners"
	OverrideVerb     = "override"
)

// OverrideRole is the name of the chart's ClusterRole that grants the
// override permission.
func OverrideRole(name string) string { return name + "-override" }

// OverrideClusterRole grants the override permission. It aggregates into no
// built-in role: operators bind it (a RoleBinding per namespace, or a
// ClusterRoleBinding) to the people and automation allowed to drain busy
// runners deliberately, and RBAC lets nobody bind it who does not hold it
// (or the verb bind on it).
func OverrideClusterRole(o Options) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: OverrideRole(o.Name)},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{OverrideGroup}, Resources: []string{OverrideResource}, Verbs: []string{OverrideVerb},
		}},
	}
}

// annotationPath and labelPath are the CEL path of one metadata key after
// object or oldObject, read as an optional so that absent compares equal to
// absent and unequal to any value.
func annotationPath(key string) string { return fmt.Sprintf(".metadata.?annotations[?%q]", key) }

func labelPath(key string) string { return fmt.Sprintf(".metadata.?labels[?%q]", key) }

const ownerReferencesPath = ".metadata.?ownerReferences.orValue([])"

// keptBy is the rule for a field only the trusted principals may change on
// an existing pod: a CREATE writes it freely (the pod's author), an UPDATE
// leaves it as it was or comes from one of trusted.
func keptBy(path string, trusted []string) string {
	return fmt.Sprintf("variables.creating || object%s == oldObject%s || request.userInfo.username in %s", path, path, celList(trusted))
}

// Policy is the ValidatingAdmissionPolicy that says who may write the
// signals the guard trusts, and its binding. It runs in the API server (no
// webhook call, and it holds while the webhook is down) on CREATE and
// UPDATE of runner pods and on UPDATE of pods/status, which can change
// labels and annotations (not ownerReferences), and of the subresources
// that can end a busy runner's job without a delete (jobRules). The policy
// and its binding are both named o.Name.
func Policy(cfg config.Config, o Options) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	override := annotationPath(runnerpod.AllowDelete)
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"},
							Resources: append([]string{"pods", "pods/status"}, JobSubresources...), Scope: ptr.To(admissionregistrationv1.NamespacedScope),
						},
					},
				}},
			},
			// Container names are immutable, so a pod is a runner pod for
			// its whole life, as the guard sees it.
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "runner-pod", Expression: "object.spec.containers.exists(c, c.name in " + celList(cfg.RunnerContainerNames()) + ")"},
			},
			Variables: append([]admissionregistrationv1.Variable{
				{Name: "creating", Expression: "request.operation == 'CREATE'"},
				// Written: set at CREATE, or added or changed by an UPDATE.
				// Removing it restores the protection, so anyone may.
				{Name: "overrideWritten", Expression: "object" + override + ".hasValue() && (variables.creating || object" + override + " != oldObject" + override + ")"},
				{Name: "mayOverride", Expression: fmt.Sprintf("authorizer.group(%q).resource(%q).namespace(object.metadata.namespace).check(%q).allowed()",
					OverrideGroup, OverrideResource, OverrideVerb)},
			}, jobVariables(cfg)...),
			Validations: append(validations(cfg, o), jobRules(cfg)...),
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        o.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources:    &admissionregistrationv1.MatchResources{NamespaceSelector: o.Selector()},
		},
	}
	return policy, binding
}

// validations are the policy's rules, each refusing with a 403 that says
// who may write the field and what to do instead.
func validations(cfg config.Config, o Options) []admissionregistrationv1.Validation {
	controllers := map[runnerpod.PresetName][]string{}
	var all []string
	for _, p := range cfg.Presets {
		controllers[p.Name] = p.ControllerPrincipals
		all = append(all, p.ControllerPrincipals...)
	}
	slices.Sort(all)
	gc := cfg.Policy.GarbageCollectors
	// trust is the garbage collector and the controllers of presets.
	trust := func(presets ...runnerpod.PresetName) []string {
		out := slices.Clone(gc)
		for _, n := range presets {
			out = append(out, controllers[n]...)
		}
		return out
	}
	rule := func(expr, msg string) admissionregistrationv1.Validation {
		return admissionregistrationv1.Validation{Expression: expr, Message: "runnerguard: " + msg, Reason: ptr.To(metav1.StatusReasonForbidden)}
	}
	createdBy := annotationPath(runnerpod.CreatedBy)
	return []admissionregistrationv1.Validation{
		rule("!variables.overrideWritten || variables.mayOverride",
			fmt.Sprintf("only a principal granted the verb %q on %s.%s in this namespace (the ClusterRole %s, bound by an operator) may set or change %s; ask one to drain the runner, or let its job finish",
				OverrideVerb, OverrideResource, OverrideGroup, OverrideRole(o.Name), runnerpod.AllowDelete)),
		rule("!variables.creating || object"+createdBy+".orValue(request.userInfo.username) == request.userInfo.username",
			fmt.Sprintf("%s names the principal that created the pod: set it to your own username or leave it out", runnerpod.CreatedBy)),
		rule("variables.creating || object"+createdBy+" == oldObject"+createdBy,
			fmt.Sprintf("%s is written once, at CREATE, and never changes", runnerpod.CreatedBy)),
		rule(keptBy(annotationPath(runnerpod.ARCLegacyUnregistered), trust(runnerpod.ARCLegacy)),
			fmt.Sprintf("only legacy ARC's controller (presets.%s.controllerPrincipals) or the garbage collector may change %s, the runner's idle signal", runnerpod.ARCLegacy, runnerpod.ARCLegacyUnregistered)),
		rule(keptBy(labelPath(runnerpod.ARCScaleSetLabel), trust(runnerpod.ARCScaleSet)),
			fmt.Sprintf("only ARC's controller (presets.%s.controllerPrincipals) or the garbage collector may change the label %s, which decides the runner's preset", runnerpod.ARCScaleSet, runnerpod.ARCScaleSetLabel)),
		rule(keptBy(labelPath(runnerpod.ARCWorkflowPodLabel), trust(runnerpod.ARCWorkflow)),
			fmt.Sprintf("only ARC's runners (presets.%s.controllerPrincipals) or the garbage collector may change the label %s, which decides the pod's preset", runnerpod.ARCWorkflow, runnerpod.ARCWorkflowPodLabel)),
		// The owner decides between fleets, so every fleet's controllers
		// may change it (a ReplicaSet controller adopting a pool's pods).
		rule(keptBy(ownerReferencesPath, slices.Concat(gc, slices.Compact(all))),
			"only the fleets' controllers (presets.*.controllerPrincipals) or the garbage collector may change a runner pod's ownerReferences, which decide its preset and whether it is idle"),
		// Removing the label would drop the pod from the watcher's cache,
		// which would take it for gone.
		rule(keptBy(labelPath(runnerpod.RunnerLabel), []string{o.ServiceAccount}),
			fmt.Sprintf("only runnerguard may change the label %s, which keeps the pod in view of its death records", runnerpod.RunnerLabel)),
	}
}
