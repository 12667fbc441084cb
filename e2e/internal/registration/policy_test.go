package registration

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/check"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/arcworkflow"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// trusted is who each fleet-owned rule of the policy lets change its field,
// keyed by the field's name in the rule's message.
func trusted(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range p.Spec.Validations {
		_, list, ok := strings.Cut(v.Expression, "request.userInfo.username in ")
		if !ok {
			continue
		}
		list, _, _ = strings.Cut(list, " ||")
		for _, field := range []string{arclegacy.Unregistered, arcscaleset.Label, arcworkflow.PodLabel, "ownerReferences"} {
			if strings.Contains(v.Message, field) {
				out[field] = list
			}
		}
	}
	for _, v := range p.Spec.Variables {
		if v.Name == "controllers" {
			out["controllers"], _, _ = strings.Cut(v.Expression, "[?variables.presetBefore]")
		}
	}
	return out
}

// name is the release the tests render.
const name = "runnerguard"

// render is Render for release name that must succeed. Without Helm the
// test skips, saying how to get it, so a plain `go test ./...` on a fresh
// clone passes.
func render(t *testing.T, cfg config.Config, o Options) *Objects {
	t.Helper()
	if _, err := Helm(); err != nil {
		t.Skip(err.Error())
	}
	o.Name = name
	objs, err := Render(cfg, o)
	require.NoError(t, err)
	return objs
}

func TestPolicyTrustsEachFleetWithItsOwnFields(t *testing.T) {
	const gc = `"system:serviceaccount:kube-system:generic-garbage-collector"`
	legacy := strconv.Quote(arclegacy.Controller)
	cases := []struct {
		name      string
		configure func(*config.Config)
		want      map[string]string
	}{
		{
			name: "by default only the garbage collector and legacy ARC's controller, which that preset must name: no fleet's controller is trusted unnamed",
			want: map[string]string{
				arclegacy.Unregistered: "[" + gc + ", " + legacy + "]",
				arcscaleset.Label:      "[" + gc + "]",
				arcworkflow.PodLabel:   "[" + gc + "]",
				"ownerReferences":      "[" + gc + "]",
				"controllers":          controllersCEL(map[runnerpod.PresetName]string{arclegacy.Name: legacy}),
			},
		},
		{
			name: "a preset's controllers get its own fields and its own pods' ownerReferences, and no other fleet's",
			configure: func(c *config.Config) {
				for i := range c.Presets {
					switch c.Presets[i].Name {
					case arcscaleset.Name:
						c.Presets[i].ControllerPrincipals = []string{"arc", "shared"}
					case arcworkflow.Name:
						c.Presets[i].ControllerPrincipals = []string{"kube-mode"}
					case arclegacy.Name:
						c.Presets[i].ControllerPrincipals = []string{"shared"}
					}
				}
				c.Policy.GarbageCollectors = []string{"kcm"}
			},
			want: map[string]string{
				arclegacy.Unregistered: `["kcm", "shared"]`,
				arcscaleset.Label:      `["kcm", "arc", "shared"]`,
				arcworkflow.PodLabel:   `["kcm", "kube-mode"]`,
				"ownerReferences":      `["kcm"]`,
				"controllers":          controllersCEL(map[runnerpod.PresetName]string{arcworkflow.Name: `"kube-mode"`, arcscaleset.Name: `"arc", "shared"`, arclegacy.Name: `"shared"`}),
			},
		},
		{
			name: "with nobody trusted nobody may change them (legacy ARC, which must trust its controller, off)",
			configure: func(c *config.Config) {
				c.Policy.GarbageCollectors = nil
				for i := range c.Presets {
					c.Presets[i].ControllerPrincipals = nil
					if c.Presets[i].Name == arclegacy.Name {
						c.Presets[i].Enabled = false
					}
				}
			},
			want: map[string]string{
				arclegacy.Unregistered: "[]", arcscaleset.Label: "[]", arcworkflow.PodLabel: "[]", "ownerReferences": "[]",
				"controllers": controllersCEL(nil),
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := configtest.Enforcing()
			if tc.configure != nil {
				tc.configure(&cfg)
			}
			assert.Equal(t, tc.want, trusted(t, render(t, cfg, Options{}).Policy))
		})
	}
}

func TestPolicyCoversRunnerPodsAndTheirStatusInTheWebhooksNamespaces(t *testing.T) {
	cfg := configtest.Enforcing()
	objs := render(t, cfg, Options{})
	p, b := objs.Policy, objs.Binding

	require.Len(t, p.Spec.MatchConstraints.ResourceRules, 1)
	rule := p.Spec.MatchConstraints.ResourceRules[0]
	assert.Equal(t, []string{"pods", "pods/status", "pods/ephemeralcontainers", "pods/resize"}, rule.Resources,
		"pods/status can change labels and annotations; ephemeral containers and resizes can end a busy runner's job")
	assert.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, rule.Operations)
	assert.Equal(t, admissionregistrationv1.Fail, *p.Spec.FailurePolicy)
	require.Len(t, p.Spec.MatchConditions, 1)
	assert.Equal(t, "runner-pod", p.Spec.MatchConditions[0].Name)
	containers, err := check.RunnerContainers(p.Spec.MatchConditions)
	require.NoError(t, err)
	assert.ElementsMatch(t, cfg.RunnerContainerNames(), containers, "the same runner pods the guard protects")
	for _, v := range p.Spec.Validations {
		assert.Equal(t, metav1.StatusReasonForbidden, *v.Reason)
		assert.True(t, strings.HasPrefix(v.Message, "runnerguard: "), v.Message)
	}

	assert.Equal(t, name, b.Spec.PolicyName)
	assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny, admissionregistrationv1.Audit}, b.Spec.ValidationActions)
	assert.Equal(t, &metav1.LabelSelector{
		MatchLabels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "kube-public", "kube-node-lease", "runnerguard", "cert-manager"},
		}},
	}, b.Spec.MatchResources.NamespaceSelector, "the webhooks' namespaces, never the cluster's own, runnerguard's or cert-manager's, even if labelled")

	given := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ci"}}
	b = render(t, cfg, Options{NamespaceSelector: given}).Binding
	assert.Equal(t, map[string]string{"team": "ci"}, b.Spec.MatchResources.NamespaceSelector.MatchLabels, "a selector replaces the opt-in label")
	assert.Empty(t, given.MatchExpressions, "the caller's selector is not modified")
}

func TestOverrideClusterRoleGrantsWhatThePolicyChecks(t *testing.T) {
	objs := render(t, configtest.Enforcing(), Options{})
	p, role := objs.Policy, objs.OverrideRole
	assert.Equal(t, name+"-override", role.Name)
	require.Len(t, role.Rules, 1)
	r := role.Rules[0]
	assert.Equal(t, rbacv1.PolicyRule{APIGroups: []string{runnerpod.OverrideGroup}, Resources: []string{runnerpod.OverrideResource}, Verbs: []string{runnerpod.OverrideVerb}}, r,
		"the permission the guard's refusals name")
	check := `authorizer.group("` + r.APIGroups[0] + `").resource("` + r.Resources[0] + `").namespace(object.metadata.namespace).check("` + r.Verbs[0] + `").allowed()`
	assert.Contains(t, p.Spec.Variables, admissionregistrationv1.Variable{Name: "mayOverride", Expression: check})
	op := objs.OverridePolicy
	require.Len(t, op.Spec.Validations, 1)
	assert.Equal(t, check, op.Spec.Validations[0].Expression, "the override policy checks the same permission")
	assert.Contains(t, op.Spec.Validations[0].Message, "the ClusterRole "+name+"-override")
	assert.Equal(t, op.Spec.MatchConstraints.ResourceRules[0].Resources, []string{"pods", "pods/status"})
}

// An override written while a namespace is not opted in would be honoured
// from the moment it opts in: the override's policy applies in every
// namespace the webhooks could ever select, opted in or not.
func TestPolicyForTheOverrideAppliesWhereverTheWebhooksCouldAct(t *testing.T) {
	for _, sel := range []*metav1.LabelSelector{nil, {MatchLabels: map[string]string{"team": "ci"}}} {
		objs := render(t, configtest.Enforcing(), Options{NamespaceSelector: sel})
		assert.Equal(t, name+"-override", objs.OverrideBinding.Spec.PolicyName)
		assert.Equal(t, []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny, admissionregistrationv1.Audit}, objs.OverrideBinding.Spec.ValidationActions)
		assert.Equal(t, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "kube-public", "kube-node-lease", "runnerguard", "cert-manager"},
		}}}, objs.OverrideBinding.Spec.MatchResources.NamespaceSelector, "every namespace but those no label opts in")
	}
}

func TestPolicyForNamespacesChecksWhatTheOptInClusterRoleGrants(t *testing.T) {
	objs := render(t, configtest.Enforcing(), Options{})
	p, role := objs.NamespacePolicy, objs.OptInRole
	assert.Equal(t, name+"-opt-in", role.Name)
	require.Len(t, role.Rules, 1)
	r := role.Rules[0]
	assert.Equal(t, rbacv1.PolicyRule{APIGroups: []string{runnerpod.OverrideGroup}, Resources: []string{runnerpod.OverrideResource}, Verbs: []string{runnerpod.OptInVerb}}, r)
	require.Len(t, p.Spec.Validations, 1)
	assert.Equal(t, `authorizer.group("`+r.APIGroups[0]+`").resource("`+r.Resources[0]+`").namespace(object.metadata.name).check("`+r.Verbs[0]+`").allowed()`,
		p.Spec.Validations[0].Expression)
	assert.Contains(t, p.Spec.Validations[0].Message, "the ClusterRole "+name+"-opt-in")
	rules := p.Spec.MatchConstraints.ResourceRules
	require.Len(t, rules, 1)
	assert.Equal(t, []string{"namespaces", "namespaces/finalize", "namespaces/status"}, rules[0].Resources,
		"every path to a namespace's labels: both subresources' strategies keep the request's metadata")
	assert.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, rules[0].Operations, "never DELETE: nothing here holds a namespace's deletion")
	assert.Equal(t, name+"-namespaces", objs.NamespaceBinding.Spec.PolicyName)

	labelsChecked := func(o Options) string {
		objs := render(t, configtest.Enforcing(), o)
		require.Len(t, objs.NamespacePolicy.Spec.MatchConditions, 1)
		return objs.NamespacePolicy.Spec.MatchConditions[0].Expression
	}
	assert.Contains(t, labelsChecked(Options{}), `["`+runnerpod.EnabledNamespaceLabel+`", "`+runnerpod.ModeLabel+`"]`)
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "ci"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"ci"}}}}
	assert.Contains(t, labelsChecked(Options{NamespaceSelector: sel}), `["env", "`+runnerpod.ModeLabel+`", "team"]`,
		"the labels a custom selector opts in by, and the mode")
}

// The node policy guards the annotations the guard reads (runnerpod's
// keys), on nodes and their status, and binds everywhere: a Node is not
// namespaced.
func TestPolicyForNodesGuardsTheDrainDeadlineTheGuardReads(t *testing.T) {
	objs := render(t, config.Default(), Options{})
	p := objs.NodePolicy
	require.Len(t, p.Spec.MatchConditions, 1)
	assert.Contains(t, p.Spec.MatchConditions[0].Expression, `["`+runnerpod.DrainDeadline+`", "`+runnerpod.DrainDeadlineBy+`"]`)
	require.Len(t, p.Spec.Validations, 2)
	assert.Contains(t, p.Spec.Validations[0].Expression, "'system:nodes' in request.userInfo")
	assert.Contains(t, p.Spec.Validations[1].Expression, `object.metadata.?annotations[?"`+runnerpod.DrainDeadlineBy+`"] == optional.of(request.userInfo.username)`)
	rules := p.Spec.MatchConstraints.ResourceRules
	require.Len(t, rules, 1)
	assert.Equal(t, []string{"nodes", "nodes/status"}, rules[0].Resources)
	assert.Equal(t, name+"-nodes", objs.NodeBinding.Spec.PolicyName)
	assert.Nil(t, objs.NodeBinding.Spec.MatchResources, "every node")
}

// The room the policy keeps on a runner pod for runnerguard's own
// annotations holds the largest refusals value the writer makes (every
// entry full, each string of characters JSON escapes to six bytes) and
// the marks beside it, under the API server's annotation limit.
func TestPolicyKeepsRoomForTheLargestRefusals(t *testing.T) {
	objs := render(t, config.Default(), Options{})
	bound := fmt.Sprintf("variables.metadataBytes <= %d ", refusal.MaxPodMetadataBytes)
	assert.True(t, slices.ContainsFunc(objs.Policy.Spec.Validations, func(v admissionregistrationv1.Validation) bool {
		return strings.Contains(v.Expression, bound) && strings.Contains(v.Message, strconv.Itoa(refusal.MaxPodMetadataBytes))
	}), "the policy bounds a runner pod's metadata at refusal.MaxPodMetadataBytes")

	escaped := func(n int) string { return strings.Repeat("<", n) }
	var worst v1alpha1.Refusals
	at := time.Date(2026, 11, 28, 0, 0, 0, 123456000, time.UTC)
	for i := range refusal.MaxEntries + 1 {
		worst = refusal.Add(worst, refusal.One{By: strconv.Itoa(i) + escaped(refusal.MaxBy), Verb: escaped(refusal.MaxVerb), Rule: escaped(refusal.MaxRule), At: at, Version: escaped(refusal.MaxVersion)})
	}
	worst.Dropped = math.MaxInt32
	value, err := refusal.Format(worst)
	require.NoError(t, err)
	require.Len(t, worst.Entries, refusal.MaxEntries)
	// The marks, the job's start and their list: a few hundred bytes.
	const marks = 4 << 10
	const apiServerLimit = 256 << 10
	assert.LessOrEqual(t, refusal.MaxPodMetadataBytes+len(refusal.Annotation)+len(value)+marks, apiServerLimit,
		"the largest refusals value (%d bytes) fits beside a pod filled to the bound", len(value))
}

// controllersCEL is the policy's map of each fleet's controllers, in
// presets.Order, each fleet's list as given (CEL string literals) or none.
func controllersCEL(given map[runnerpod.PresetName]string) string {
	var entries []string
	for _, n := range presets.Order {
		entries = append(entries, fmt.Sprintf("%q: [%s]", n, given[n]))
	}
	return "{" + strings.Join(entries, ", ") + "}"
}
