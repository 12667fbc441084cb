package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func namespace(name string, labels map[string]string) corev1.Namespace {
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// The chart's selector: the opt-in label, never the system namespaces.
var optIn = &metav1.LabelSelector{
	MatchLabels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"},
	MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn,
		Values: []string{"kube-system", "runnerguard"}}},
}

func TestOptedInNamespacesCarryTheGuardsModeInEach(t *testing.T) {
	on := map[string]string{runnerpod.EnabledNamespaceLabel: "true"}
	nss := []corev1.Namespace{
		namespace("zeta", on),
		namespace("alpha", map[string]string{runnerpod.EnabledNamespaceLabel: "true", runnerpod.ModeLabel: "enforce"}),
		namespace("kube-system", map[string]string{runnerpod.EnabledNamespaceLabel: "true", "kubernetes.io/metadata.name": "kube-system"}),
		namespace("plain", nil),
		namespace("typo", map[string]string{runnerpod.EnabledNamespaceLabel: "true", runnerpod.ModeLabel: "enforced"}),
	}
	enforce := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: runnerpod.ModeLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"enforce"}}}}
	assert.Equal(t, []Namespace{
		{Name: "alpha", Mode: config.ModeEnforce, Labelled: true},
		{Name: "typo", Mode: config.ModeWarn},
		{Name: "zeta", Mode: config.ModeWarn},
	}, optedIn(nss, []*metav1.LabelSelector{optIn}, enforce, true), "by name; the mode the enforce registration selects, as the API server does")
	assert.Equal(t, []Namespace{{Name: "alpha", Mode: config.ModeEnforce, Labelled: true}, {Name: "typo"}, {Name: "zeta"}},
		optedIn(nss, []*metav1.LabelSelector{optIn}, nil, false), "no enforce registration: the label, else not known")
	assert.Len(t, optedIn(nss, []*metav1.LabelSelector{nil}, enforce, true), len(nss), "no selector selects every namespace")
}

func TestProbeNamespace(t *testing.T) {
	nss := []corev1.Namespace{
		namespace("b", map[string]string{runnerpod.EnabledNamespaceLabel: "true"}),
		namespace("a", map[string]string{runnerpod.EnabledNamespaceLabel: "true"}),
		namespace("plain", nil),
	}
	for name, tc := range map[string]struct {
		nss        []corev1.Namespace
		asked      string
		ns, reason string
	}{
		"the first opted-in namespace by name":                   {nss: nss, ns: "a"},
		"the namespace asked for, when the webhook acts there":   {nss: nss, asked: "b", ns: "b"},
		"a namespace asked for that the webhook does not act in": {nss: nss, asked: "plain", reason: "it does not act in namespace plain"},
		"no namespace opted in":                                  {nss: nss[2:], reason: "it acts in no namespace"},
	} {
		t.Run(name, func(t *testing.T) {
			ns, reason := probeNamespace(optIn, tc.nss, tc.asked)
			assert.Equal(t, tc.ns, ns)
			assert.Equal(t, tc.reason, reason)
		})
	}
}
