package chart_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/config"
)

// The chart's ValidatingAdmissionPolicy and its binding must be exactly
// what registration.Policy builds from the config the chart renders, and
// the override ClusterRole must grant exactly the permission the policy
// checks.
func TestPolicyEqualsRegistration(t *testing.T) {
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
  arc-workflow: {controllerPrincipals: ["system:serviceaccount:ci:arc-runner-kube-mode"]}
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
			name:     "disabled presets leave their containers out of the match condition",
			values:   "presets: {gitlab: {enabled: false}, arc-workflow: {enabled: false}}",
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
				wantP, wantB := registration.Policy(cfg, registration.Options{Name: name, NamespaceSelector: tc.selector,
					ReleaseNamespace: namespace, CertManagerNamespace: "cert-manager", ServiceAccount: "system:serviceaccount:" + namespace + ":" + name})

				var policy admissionregistrationv1.ValidatingAdmissionPolicy
				objs.get(t, "ValidatingAdmissionPolicy", name, &policy)
				assert.Equal(t, wantP.TypeMeta, policy.TypeMeta)
				assert.Equal(t, wantP.Spec, policy.Spec)

				var binding admissionregistrationv1.ValidatingAdmissionPolicyBinding
				objs.get(t, "ValidatingAdmissionPolicyBinding", name, &binding)
				assert.Equal(t, wantB.TypeMeta, binding.TypeMeta)
				assert.Equal(t, wantB.Spec, binding.Spec)

				var role rbacv1.ClusterRole
				wantR := registration.OverrideClusterRole(registration.Options{Name: name})
				objs.get(t, "ClusterRole", wantR.Name, &role)
				assert.Equal(t, wantR.TypeMeta, role.TypeMeta)
				assert.Equal(t, wantR.Rules, role.Rules)
				assert.Empty(t, role.AggregationRule, "no built-in role may carry the override")
				for k := range role.Labels {
					assert.NotContains(t, k, "aggregate-to", "no built-in role may carry the override")
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
