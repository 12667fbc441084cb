package recorder

import (
	"context"
	"testing"

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
	_, known := m.Enforce(nil)
	assert.False(t, known, "nothing is known before the registration is read")

	require.NoError(t, m.read(context.Background()))
	enforce, known := m.Enforce(map[string]string{"runnerguard.io/mode": "enforce"})
	assert.True(t, known)
	assert.True(t, enforce, "a namespace labelled enforce")
	enforce, _ = m.Enforce(nil)
	assert.False(t, enforce, "an unlabelled namespace under a warn rollout")
	assert.Equal(t, 1, changes)

	vwc.Webhooks[1].NamespaceSelector = selector(metav1.LabelSelectorOpNotIn, "warn")
	require.NoError(t, c.Update(context.Background(), vwc))
	require.NoError(t, m.read(context.Background()))
	enforce, _ = m.Enforce(nil)
	assert.True(t, enforce, "an unlabelled namespace once the rollout is enforce")
	enforce, _ = m.Enforce(map[string]string{"runnerguard.io/mode": "warn"})
	assert.False(t, enforce, "a namespace labelled warn")
	assert.Equal(t, 2, changes)
	require.NoError(t, m.read(context.Background()))
	assert.Equal(t, 2, changes, "an unchanged selector judges nothing again")

	// Break-glass deletes the registration: nothing is enforced any more,
	// so the marker lets the budgets go.
	require.NoError(t, c.Delete(context.Background(), vwc))
	require.NoError(t, m.read(context.Background()))
	enforce, known = m.Enforce(map[string]string{"runnerguard.io/mode": "enforce"})
	assert.True(t, known)
	assert.False(t, enforce, "no namespace is in enforce mode once the registration is gone")
	assert.Equal(t, 3, changes)
}

// Without a registration (runnerguard run outside the chart), the label
// decides, else the configured mode.
func TestModesWithoutARegistration(t *testing.T) {
	m := &Modes{Default: config.ModeEnforce}
	enforce, known := m.Enforce(nil)
	assert.True(t, known)
	assert.True(t, enforce)
	enforce, _ = m.Enforce(map[string]string{"runnerguard.io/mode": "warn"})
	assert.False(t, enforce)
}
