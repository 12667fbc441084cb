package recorder

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runnerguard/runnerguard/internal/config"
)

// The marker reads each namespace's mode from the enforce registration's
// selector, as the API server applies it, and sees a switch without a
// restart.
func TestModesFollowTheEnforceRegistration(t *testing.T) {
	selector := func(op metav1.LabelSelectorOperator, mode string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "runnerguard.io/mode", Operator: op, Values: []string{mode}}}}
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "rg"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "delete-warn.guard.runnerguard.io", NamespaceSelector: selector(metav1.LabelSelectorOpNotIn, "enforce")},
			{Name: EnforceWebhook, NamespaceSelector: selector(metav1.LabelSelectorOpIn, "enforce")},
		},
	}
	c := fake.NewClientBuilder().WithObjects(vwc).Build()
	changes := 0
	m := &Modes{Reader: c, Name: "rg", Changed: func() { changes++ }}
	_, known, _ := m.Enforce(nil)
	assert.False(t, known, "nothing is known before the registration is read")

	require.NoError(t, m.read(context.Background()))
	enforce, known, _ := m.Enforce(map[string]string{"runnerguard.io/mode": "enforce"})
	assert.True(t, known)
	assert.True(t, enforce, "a namespace labelled enforce")
	enforce, _, _ = m.Enforce(nil)
	assert.False(t, enforce, "an unlabelled namespace under a warn rollout")
	assert.Equal(t, 1, changes)

	vwc.Webhooks[1].NamespaceSelector = selector(metav1.LabelSelectorOpNotIn, "warn")
	require.NoError(t, c.Update(context.Background(), vwc))
	require.NoError(t, m.read(context.Background()))
	enforce, _, _ = m.Enforce(nil)
	assert.True(t, enforce, "an unlabelled namespace once the rollout is enforce")
	enforce, _, _ = m.Enforce(map[string]string{"runnerguard.io/mode": "warn"})
	assert.False(t, enforce, "a namespace labelled warn")
	assert.Equal(t, 2, changes)
	require.NoError(t, m.read(context.Background()))
	assert.Equal(t, 2, changes, "an unchanged selector judges nothing again")

	// Break-glass deletes the registration: nothing is enforced any more,
	// so the marker lets the budgets go.
	require.NoError(t, c.Delete(context.Background(), vwc))
	require.NoError(t, m.read(context.Background()))
	enforce, known, _ = m.Enforce(map[string]string{"runnerguard.io/mode": "enforce"})
	assert.True(t, known)
	assert.False(t, enforce, "no namespace is in enforce mode once the registration is gone")
	assert.Equal(t, 3, changes)
}

// Without a registration (runnerguard run outside the chart), the label
// decides, else the configured mode.
func TestModesWithoutARegistration(t *testing.T) {
	m := &Modes{Default: config.ModeEnforce}
	enforce, known, _ := m.Enforce(nil)
	assert.True(t, known)
	assert.True(t, enforce)
	enforce, _, _ = m.Enforce(map[string]string{"runnerguard.io/mode": "warn"})
	assert.False(t, enforce)
}

// The README's emergency row sets the enforce registration's webhooks to
// Ignore: where the chart rendered Fail, that is the operator's off
// switch, and the leader releases every namespace the registration acts
// in (no budget, no busy mark) until the row is undone. A registration
// the chart rendered Ignore says nothing by being Ignore. Removing the
// registration, once seen, releases every namespace.
func TestModesObeyTheOperatorsOffSwitch(t *testing.T) {
	enforced := map[string]string{"runnerguard.io/mode": "enforce"}
	warned := map[string]string{"runnerguard.io/mode": "warn"}
	registration := func(rendered, live admissionregistrationv1.FailurePolicyType) *admissionregistrationv1.ValidatingWebhookConfiguration {
		return &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "rg", Annotations: map[string]string{RenderedFailurePolicy: string(rendered)}},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: EnforceWebhook, FailurePolicy: &live,
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"runnerguard.io/mode": "enforce"}}}},
		}
	}
	type state struct{ enforce, released bool }
	read := func(t *testing.T, m *Modes, ns map[string]string) state {
		t.Helper()
		require.NoError(t, m.read(context.Background()))
		enforce, known, released := m.Enforce(ns)
		require.True(t, known)
		return state{enforce, released}
	}
	ctx := context.Background()

	vwc := registration(admissionregistrationv1.Fail, admissionregistrationv1.Fail)
	c := fake.NewClientBuilder().WithObjects(vwc).Build()
	changes := 0
	m := &Modes{Reader: c, Name: "rg", Changed: func() { changes++ }}
	assert.Equal(t, state{enforce: true}, read(t, m, enforced), "as rendered: enforced")

	ignore := admissionregistrationv1.Ignore
	vwc.Webhooks[0].FailurePolicy = &ignore
	require.NoError(t, c.Update(ctx, vwc))
	assert.Equal(t, state{released: true}, read(t, m, enforced), "switched off: released where it acted")
	assert.Equal(t, state{}, read(t, m, warned), "a warn namespace was never held by a budget and keeps its marks")
	assert.Equal(t, 2, changes, "the switch judges every pod again")
	assert.Equal(t, 1.0, testutil.ToFloat64(enforceSwitchedOff))

	fail := admissionregistrationv1.Fail
	vwc.Webhooks[0].FailurePolicy = &fail
	require.NoError(t, c.Update(ctx, vwc))
	assert.Equal(t, state{enforce: true}, read(t, m, enforced), "the row undone: protected again")
	assert.Equal(t, 3, changes)
	assert.Equal(t, 0.0, testutil.ToFloat64(enforceSwitchedOff))

	require.NoError(t, c.Delete(ctx, vwc))
	assert.Equal(t, state{released: true}, read(t, m, enforced), "break-glass: released")
	assert.Equal(t, state{released: true}, read(t, m, warned), "break-glass releases every namespace")

	// Rendered Ignore: Ignore is the chart's, not a switch.
	c = fake.NewClientBuilder().WithObjects(registration(admissionregistrationv1.Ignore, admissionregistrationv1.Ignore)).Build()
	m = &Modes{Reader: c, Name: "rg"}
	assert.Equal(t, state{enforce: true}, read(t, m, enforced), "an install rendered Ignore keeps its budgets")

	// A registration never seen (a leader up before its chart's
	// registration) releases nothing.
	m = &Modes{Reader: fake.NewClientBuilder().Build(), Name: "rg"}
	assert.Equal(t, state{}, read(t, m, enforced))

	// A leader elected after break-glass never saw the registration, but
	// its injector twin is there: removed, not yet installed.
	twin := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rg"}}
	m = &Modes{Reader: fake.NewClientBuilder().WithObjects(twin).Build(), Name: "rg"}
	assert.Equal(t, state{released: true}, read(t, m, enforced))
}
