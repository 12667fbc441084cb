package recorder

import (
	"context"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/internal/config"
)

// EnforceWebhook is the registration whose namespace selector picks the
// enforce namespaces: the chart's one statement of each namespace's mode
// (its runnerguard.io/mode label, else guard.rollout).
const EnforceWebhook = "delete.guard.runnerguard.io"

// RenderedFailurePolicy is the annotation the chart sets on the webhook
// configuration with EnforceWebhook's failure policy as rendered: a live
// Ignore where it says Fail is an operator's off switch (the README's
// emergency row), not the chart's. Only a principal who may change webhook
// configurations (cluster-admin) can write either.
const RenderedFailurePolicy = "runnerguard.io/delete-failure-policy"

// Modes tells the marker which namespaces are in enforce mode, as the
// API server selects them: from the enforce registration of the webhook
// configuration Name, read every Interval, so a chart-wide switch reaches
// the budgets without the pods rolling. Without a Name (runnerguard run
// outside the chart) the namespace's label decides, else Default.
type Modes struct {
	Reader   client.Reader
	Name     string
	Default  config.Mode
	Interval time.Duration
	// Changed is called when the selector changes, so every pod is judged
	// again.
	Changed func()

	// reading makes the reads one at a time, so a slow periodic read
	// cannot apply an older registration over a Refresh's newer one.
	reading  sync.Mutex
	mu       sync.Mutex
	selector labels.Selector
	// released selects the namespaces the operator switched off: those
	// of an EnforceWebhook set to Ignore where the chart rendered Fail,
	// or every one once the registration, seen before, was removed; nil
	// while the switch is not on.
	released labels.Selector
	seen     bool
}

// NeedLeaderElection: the marker that reads it runs on the leader.
func (m *Modes) NeedLeaderElection() bool { return true }

// Start reads the registration until ctx ends.
func (m *Modes) Start(ctx context.Context) error {
	if m.Name == "" {
		return nil
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := m.read(ctx); err != nil {
			logf.FromContext(ctx).Error(err, "reading the enforce namespaces' selector", "webhookConfiguration", m.Name)
		}
	}, m.Interval)
	return nil
}

// Refresh reads the registration now, as the next periodic read would.
func (m *Modes) Refresh(ctx context.Context) error {
	if m.Name == "" {
		return nil
	}
	return m.read(ctx)
}

func (m *Modes) read(ctx context.Context) error {
	m.reading.Lock()
	defer m.reading.Unlock()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	// A registration deleted (break-glass, an uninstall) enforces nowhere:
	// the budgets go too, or they would hold what the operator freed.
	err := m.Reader.Get(ctx, client.ObjectKey{Name: m.Name}, vwc)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	found := err == nil
	sel := labels.Nothing()
	var released labels.Selector
	for _, w := range vwc.Webhooks {
		if w.Name != EnforceWebhook || w.NamespaceSelector == nil {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
		if err != nil {
			return err
		}
		sel = s
		if switchedOff(vwc, w) {
			released = s
		}
	}
	removed := !found && (m.seen || m.injectorThere(ctx))
	m.mu.Lock()
	if removed {
		released = labels.Everything()
	}
	m.seen = m.seen || found
	changed := m.selector == nil || !sameSelector(m.selector, sel) || (m.released == nil) != (released == nil) ||
		released != nil && !sameSelector(m.released, released)
	if (m.released == nil) != (released == nil) {
		logf.FromContext(ctx).Info("the operator's off switch changed: while it is on, no budget and no busy mark is kept where the enforce registration acts",
			"webhookConfiguration", m.Name, "off", released != nil)
	}
	m.selector, m.released = sel, released
	m.mu.Unlock()
	enforceSwitchedOff.Set(map[bool]float64{true: 1}[released != nil])
	if changed && m.Changed != nil {
		m.Changed()
	}
	return nil
}

// injectorThere reports whether the injector's webhook configuration of
// the same name exists: the chart installs both, and break-glass removes
// the guard's alone, so a leader that never saw the guard's (one elected
// after break-glass) still tells it removed from not yet installed.
func (m *Modes) injectorThere(ctx context.Context) bool {
	mwc := &metav1.PartialObjectMetadata{}
	mwc.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"))
	return m.Reader.Get(ctx, client.ObjectKey{Name: m.Name}, mwc) == nil
}

// sameSelector: a and b select the same namespaces, as far as their
// strings tell (Nothing and Everything both print as "").
func sameSelector(a, b labels.Selector) bool {
	return a.String() == b.String() && labels.MatchesNothing(a) == labels.MatchesNothing(b)
}

// switchedOff: the enforce delete webhook answers Ignore where the chart
// rendered Fail, which only the operator's patch (the README's emergency
// row) makes it.
func switchedOff(vwc *admissionregistrationv1.ValidatingWebhookConfiguration, w admissionregistrationv1.ValidatingWebhook) bool {
	rendered := admissionregistrationv1.FailurePolicyType(vwc.Annotations[RenderedFailurePolicy])
	return rendered == admissionregistrationv1.Fail && w.FailurePolicy != nil && *w.FailurePolicy == admissionregistrationv1.Ignore
}

// SwitchedOff reports whether the operator has switched vwc's enforce
// registration off (switchedOff): what the leader obeys, and check says.
func SwitchedOff(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
	for _, w := range vwc.Webhooks {
		if w.Name == EnforceWebhook && switchedOff(vwc, w) {
			return true
		}
	}
	return false
}

// Enforce reports whether a namespace with nsLabels is in enforce mode,
// and false for known when the registration has not been read yet.
// released: the operator switched the enforce registration off where the
// namespace is: runnerguard holds nothing there, neither a budget nor a
// busy mark, until the switch is undone.
func (m *Modes) Enforce(nsLabels map[string]string) (enforce, known, released bool) {
	if m.Name == "" {
		return config.ModeFor(nsLabels, m.Default) == config.ModeEnforce, true, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.selector == nil {
		return false, false, false
	}
	if m.released != nil && m.released.Matches(labels.Set(nsLabels)) {
		return false, true, true
	}
	return m.selector.Matches(labels.Set(nsLabels)), true, false
}
