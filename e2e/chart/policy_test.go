package chart_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/check"
	"github.com/runnerguard/runnerguard/internal/config"
)

// The chart's ValidatingAdmissionPolicy covers the runner pods its config
// names, in the webhooks' namespaces, keeps the runner label runnerguard's
// own, and checks the permission its override ClusterRole grants, under
// the release's full name. What each rule trusts per preset is tested in
// e2e/internal/registration, on the same rendered chart.
func TestPolicy(t *testing.T) {
	optIn := &metav1.LabelSelector{
		MatchLabels: map[string]string{"runnerguard.io/enabled": "true"},
	}
	cases := []struct {
		name     string
		values   string
		selector *metav1.LabelSelector
	}{
		{name: "defaults trust only the garbage collector", selector: optIn},
		{
			name:   "listed namespaces are the policy's too, never the cluster's own",
			values: "namespaces: [ci, kube-system]",
			selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"ci", "kube-system"}},
			}},
		},
		{
			name: "each preset's controllers reach its own fields and everyone's ownerReferences",
			values: `presets:
  arc-scale-set: {controllerPrincipals: ["system:serviceaccount:arc-systems:arc-gha-rs-controller"]}
  arc-workflow: {controllerPrincipals: ["system:serviceaccount:arc-systems:arc-workflow-controller"]}
  arc-legacy: {controllerPrincipals: ["system:serviceaccount:arc:legacy", "system:serviceaccount:arc-systems:arc-gha-rs-controller"]}
  generic: {controllerPrincipals: ["system:serviceaccount:kube-system:replicaset-controller"]}
policy: {garbageCollectors: ["system:kube-controller-manager", "system:serviceaccount:kube-system:generic-garbage-collector"]}`,
			selector: optIn,
		},
		{
			name:     "without any trusted principal nobody may change the fleets' fields",
			values:   "presets: {arc-legacy: {controllerPrincipals: []}}\npolicy: {garbageCollectors: []}",
			selector: optIn,
		},
		{
			name:     "presets not chosen leave their containers out of the match condition",
			values:   "presets: {enabled: [generic, arc-scale-set]}",
			selector: optIn,
		},
		{
			name:     "principals with quotes and backslashes stay valid CEL strings",
			values:   `presets: {arc-legacy: {controllerPrincipals: ["odd\"name\\x"]}}`,
			selector: optIn,
		},
		{
			name:     "the full name names the policy, its binding and the override role",
			values:   "fullnameOverride: ci-guard",
			selector: optIn,
		},
	}
	for _, h := range helms(t) {
		for _, tc := range cases {
			t.Run(h.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				objs := h.render(t, tc.values)
				var cm corev1.ConfigMap
				name := nameOf(objs, "ConfigMap")
				objs.get(t, "ConfigMap", name, &cm)
				cfg, err := config.Parse([]byte(cm.Data["config.yaml"]))
				require.NoError(t, err, "the rendered config does not load")
				sa := "system:serviceaccount:" + namespace + ":" + nameOf(objs, "ServiceAccount")

				var policy admissionregistrationv1.ValidatingAdmissionPolicy
				objs.get(t, "ValidatingAdmissionPolicy", name, &policy)
				containers, err := check.RunnerContainers(policy.Spec.MatchConditions)
				require.NoError(t, err)
				assert.ElementsMatch(t, cfg.RunnerContainerNames(), containers, "the same runner pods the guard protects")
				runnerLabel := false
				for _, v := range policy.Spec.Validations {
					if strings.Contains(v.Message, "runnerguard.io/runner") {
						runnerLabel = true
						assert.Contains(t, v.Expression, "request.userInfo.username in "+celStrings([]string{sa}), "only runnerguard's own ServiceAccount may change its runner label")
					}
				}
				assert.True(t, runnerLabel, "the policy keeps the runner label runnerguard's")

				var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
				objs.get(t, "ValidatingAdmissionPolicyBinding", name, &binding)
				assert.Equal(t, name, binding.Spec.PolicyName)
				assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny, admissionregistrationv1.Audit}, binding.Spec.ValidationActions)
				assert.Equal(t, selectorWithout(tc.selector, "cert-manager"), binding.Spec.MatchResources.NamespaceSelector, "the webhooks' namespaces")

				var role rbacv1.ClusterRole
				objs.get(t, "ClusterRole", name+"-override", &role)
				r := role.Rules
				require.Len(t, r, 1)
				check := fmt.Sprintf("authorizer.group(%q).resource(%q).namespace(object.metadata.namespace).check(%q).allowed()", r[0].APIGroups[0], r[0].Resources[0], r[0].Verbs[0])
				assert.Contains(t, policy.Spec.Variables, admissionregistrationv1.Variable{Name: "mayOverride", Expression: check}, "the override role grants what the policy checks")
				assert.Empty(t, role.AggregationRule, "no built-in role may carry the override")
				for k := range role.Labels {
					assert.NotContains(t, k, "aggregate-to", "no built-in role may carry the override")
				}

				// The override's and the namespaces' policies, their bindings
				// and the opt-in role, under the same full name.
				for _, p := range []string{name + "-override", name + "-namespaces"} {
					var policy admissionregistrationv1.ValidatingAdmissionPolicy
					objs.get(t, "ValidatingAdmissionPolicy", p, &policy)
					var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
					objs.get(t, "ValidatingAdmissionPolicyBinding", p, &binding)
					assert.Equal(t, p, binding.Spec.PolicyName)
					assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny, admissionregistrationv1.Audit}, binding.Spec.ValidationActions)
				}
				var optIn rbacv1.ClusterRole
				objs.get(t, "ClusterRole", name+"-opt-in", &optIn)
				assert.Empty(t, optIn.AggregationRule, "no built-in role may carry opt-in")
				for k := range optIn.Labels {
					assert.NotContains(t, k, "aggregate-to", "no built-in role may carry opt-in")
				}
			})
		}
	}
}

// nameOf is the name of the only rendered object of kind.
func nameOf(objs objects, kind string) string {
	for _, u := range objs {
		if u.GetKind() == kind {
			return u.GetName()
		}
	}
	return ""
}
