//go:build load

package load

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// noMatchConditions is the guard's DELETE webhook without its
// matchConditions, selecting nsNoMatch: the API server then calls it for
// every review of a delete, as it calls Kyverno and Gatekeeper.
func noMatchConditions(cfg config.Config, s *apitest.Server) (*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	o := s.Options()
	o.Name = "runnerguard-nomatch"
	o.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{noMatchLabel: "true"}}
	objs, err := registration.Render(cfg, o)
	if err != nil {
		return nil, err
	}
	vwc := objs.Validating
	vwc.Webhooks = slices.DeleteFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return w.Name != registration.DeleteWebhook
	})
	vwc.Webhooks[0].MatchConditions = nil
	return vwc, nil
}

// guardPolicy is the guard's decision for the generic preset written as a
// ValidatingAdmissionPolicy, the in-process floor: the same
// matchConditions (rules 1, 2 and 8), then rules 3, 4, 5 and 9 in CEL
// (the generic preset has no idle signal and no job owner, rules 6 and 7).
// A delete is refused when a runner container is running, the pod has not
// finished and no override reason is given.
func guardPolicy(cfg config.Config, s *apitest.Server) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	objs, err := registration.Render(cfg, s.Options())
	if err != nil {
		return nil, nil, err
	}
	del, err := objs.Webhook(registration.DeleteWebhook)
	if err != nil {
		return nil, nil, err
	}
	var runners []string
	for _, p := range cfg.Presets {
		if p.Name == generic.Name {
			runners = p.RunnerContainers
		}
	}
	quoted := make([]string, len(runners))
	for i, r := range runners {
		quoted[i] = fmt.Sprintf("%q", r)
	}
	override := fmt.Sprintf("%q", runnerpod.AllowDelete)
	allowed := strings.Join([]string{
		`oldObject.status.phase in ["Succeeded", "Failed"]`,
		`!has(oldObject.status.containerStatuses)`,
		`!oldObject.status.containerStatuses.exists(s, s.name in [` + strings.Join(quoted, ", ") + `] && has(s.state) && has(s.state.running))`,
		`(has(oldObject.metadata.annotations) && ` + override + ` in oldObject.metadata.annotations && oldObject.metadata.annotations[` + override + `].trim() != "")`,
	}, " ||\n")
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "runnerguard-floor"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
						},
					},
				}},
			},
			MatchConditions: del.MatchConditions,
			Validations: []admissionregistrationv1.Validation{{
				Expression: allowed,
				Message:    "runner is busy; set " + runnerpod.AllowDelete + " to override",
				Reason:     ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "runnerguard-floor"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{vapLabel: "true"}},
			},
		},
	}
	return policy, binding, nil
}
