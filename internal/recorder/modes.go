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

	mu       sync.Mutex
	selector labels.Selector
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

func (m *Modes) read(ctx context.Context) error {
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	// A registration deleted (break-glass, an uninstall) enforces nowhere:
	// the budgets go too, or they would hold what the operator freed.
	if err := m.Reader.Get(ctx, client.ObjectKey{Name: m.Name}, vwc); client.IgnoreNotFound(err) != nil {
		return err
	}
	sel := labels.Nothing()
	for _, w := range vwc.Webhooks {
		if w.Name != EnforceWebhook || w.NamespaceSelector == nil {
			continue
		}
		s, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
		if err != nil {
			return err
		}
		sel = s
	}
	m.mu.Lock()
	changed := m.selector == nil || m.selector.String() != sel.String()
	m.selector = sel
	m.mu.Unlock()
	if changed && m.Changed != nil {
		m.Changed()
	}
	return nil
}

// Enforce reports whether a namespace with nsLabels is in enforce mode,
// and false for known when the registration has not been read yet.
func (m *Modes) Enforce(nsLabels map[string]string) (enforce, known bool) {
	if m.Name == "" {
		return config.ModeFor(nsLabels, m.Default) == config.ModeEnforce, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.selector == nil {
		return false, false
	}
	return m.selector.Matches(labels.Set(nsLabels)), true
}
