package registration

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config"
)

// ConnectMatchConditions send the guard only the exec and attach that can
// reach a runner container (one named so, or none named: the pod's only
// container), from a principal neither exempt nor granted the override:
// the API server decides the rest, so a kubectl exec into any other pod or
// container costs no webhook call.
func ConnectMatchConditions(cfg config.Config) []admissionregistrationv1.MatchCondition {
	mc := []admissionregistrationv1.MatchCondition{
		{Name: "runner-container", Expression: "!has(object.container) || object.container in " + celList(cfg.RunnerContainerNames())},
	}
	mc = append(mc, exemptCondition(cfg)...)
	return append(mc, admissionregistrationv1.MatchCondition{Name: "no-override", Expression: fmt.Sprintf(
		"!authorizer.group(%q).resource(%q).namespace(request.namespace).check(%q).allowed()", OverrideGroup, OverrideResource, OverrideVerb)})
}

// connectWebhook is the guard's webhook for CONNECT of pods/exec and
// pods/attach. Ignore: GitLab runs every job script through attach or exec,
// so a guard outage must not stop CI; the outage opens this path, as it
// does not open the delete path (docs/security-bypass-matrix.md). It
// writes nothing, so it has no side effects.
func connectWebhook(cfg config.Config, o Options) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		Name:         ConnectWebhook,
		ClientConfig: o.ClientConfig(ConnectPath),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Connect},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{""}, APIVersions: []string{"v1"},
				Resources: []string{"pods/exec", "pods/attach"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
			},
		}},
		FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
		MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
		NamespaceSelector:       o.Selector(),
		ObjectSelector:          &metav1.LabelSelector{},
		SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:          ptr.To(o.TimeoutSeconds),
		AdmissionReviewVersions: []string{"v1"},
		MatchConditions:         ConnectMatchConditions(cfg),
	}
}
