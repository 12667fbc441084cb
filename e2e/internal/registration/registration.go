package registration

import (
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/webhook/guard"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

// Paths served by the webhook server.
const (
	GuardPath   = guard.Path
	ConnectPath = guard.ConnectPath
	InjectPath  = inject.Path
)

// Webhook names, as they appear in API server errors and metrics.
const (
	DeleteWebhook   = "delete.guard.runnerguard.io"
	EvictionWebhook = "eviction.guard.runnerguard.io"
	ConnectWebhook  = "connect.guard.runnerguard.io"
	InjectWebhook   = "inject.runnerguard.io"
	// EphemeralRunnerWebhook sees deletes of ARC's EphemeralRunners, so the
	// pod deletion ARC carries out later names who started it.
	EphemeralRunnerWebhook = "ephemeralrunner-delete.guard.runnerguard.io"
)

// Options are the installation's choices around the config.
type Options struct {
	// Name of both configuration objects.
	Name string
	// ClientConfig returns how the API server reaches path: a Service in a
	// cluster, a URL in tests.
	ClientConfig func(path string) admissionregistrationv1.WebhookClientConfig
	// NamespaceSelector picks the protected namespaces; nil means the opt-in
	// label runnerguard.io/enabled=true. SystemNamespaces and the two below
	// are never selected, whatever the selector says.
	NamespaceSelector *metav1.LabelSelector
	// ReleaseNamespace is where runnerguard runs, and CertManagerNamespace
	// cert-manager's: a webhook there could block its own repair, or the
	// issuing of its own certificate.
	ReleaseNamespace, CertManagerNamespace string
	// ServiceAccount is runnerguard's own username
	// (system:serviceaccount:<release namespace>:<name>): the policy lets
	// only it change a runner pod's runnerguard.io/runner label.
	ServiceAccount string
	// DeleteFailurePolicy: with Fail, an outage refuses only the deletes the
	// guard would have judged (matchConditions filter the rest at the API
	// server). EvictionFailurePolicy: with Fail, an outage refuses every
	// eviction in protected namespaces, so drains wait.
	DeleteFailurePolicy   admissionregistrationv1.FailurePolicyType
	EvictionFailurePolicy admissionregistrationv1.FailurePolicyType
	TimeoutSeconds        int32
}

// SystemNamespaces hold the cluster's own machinery: never selected, even
// if labelled, so no runnerguard outage can block it.
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// Selector is the namespaceSelector of both webhooks: the chosen namespaces
// without the never-selected ones, by their kubernetes.io/metadata.name
// label, which the API server sets and no one can change.
func (o Options) Selector() *metav1.LabelSelector {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"}}
	if o.NamespaceSelector != nil {
		sel = o.NamespaceSelector.DeepCopy()
	}
	var never []string
	for _, ns := range append(slices.Clone(SystemNamespaces), o.ReleaseNamespace, o.CertManagerNamespace) {
		if ns != "" && !slices.Contains(never, ns) {
			never = append(never, ns)
		}
	}
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: never,
	})
	return sel
}

// celList renders names as a CEL list literal of strings.
func celList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// unlabelled is a runner pod the injector never saw (created while it was
// down): the pod watcher does not see it until the guard or the leader's
// labeler labels it, so its delete reaches the guard whatever its state.
var unlabelled = fmt.Sprintf("!has(oldObject.metadata.labels) || !(%q in oldObject.metadata.labels)", runnerpod.RunnerLabel)

// DeleteMatchConditions are rules 1 to 5 and 8 of the guard's table,
// evaluated in the API server, so the webhook is called only for deletes of
// running runners: never for other pods, for the repeat reviews of a delete
// already under way (the kubelet's final delete among them), for the
// fleet's cleanup of finished or never-started runners, or for cluster
// machinery; and a Fail policy cannot block them. Rules 3 to 5 need no
// webhook since the pod watcher, not the guard, records deaths, except for
// a pod the watcher cannot see yet (unlabelled), which the guard labels.
func DeleteMatchConditions(cfg config.Config) []admissionregistrationv1.MatchCondition {
	names := celList(cfg.RunnerContainerNames())
	mc := []admissionregistrationv1.MatchCondition{
		{Name: "runner-pod", Expression: "oldObject.spec.containers.exists(c, c.name in " + names + ")"},
		{Name: "not-terminating", Expression: "!has(oldObject.metadata.deletionTimestamp)"},
		{Name: "pod-not-finished", Expression: unlabelled + " || !has(oldObject.status.phase) || !(oldObject.status.phase in ['Succeeded', 'Failed'])"},
		{Name: "runner-running", Expression: unlabelled + " || has(oldObject.status.containerStatuses) && oldObject.status.containerStatuses.exists(s, s.name in " + names + " && has(s.state) && has(s.state.running))"},
	}
	return append(mc, exemptCondition(cfg)...)
}

// exemptCondition is rule 8. An eviction's object is the Eviction, so this
// is the only rule its webhook can evaluate at the API server.
func exemptCondition(cfg config.Config) []admissionregistrationv1.MatchCondition {
	if len(cfg.Guard.ExemptPrincipals) == 0 {
		return nil
	}
	return []admissionregistrationv1.MatchCondition{
		{Name: "not-exempt", Expression: "!(request.userInfo.username in " + celList(cfg.Guard.ExemptPrincipals) + ")"},
	}
}

// EphemeralRunnerMatchConditions send the guard only the first delete of an
// EphemeralRunner (a repeat changes nothing), and none by an exempt
// principal.
func EphemeralRunnerMatchConditions(cfg config.Config) []admissionregistrationv1.MatchCondition {
	mc := []admissionregistrationv1.MatchCondition{
		{Name: "not-terminating", Expression: "!has(oldObject.metadata.deletionTimestamp)"},
	}
	return append(mc, exemptCondition(cfg)...)
}

// Validating is the guard's configuration: one webhook for DELETE of pods
// and one for CREATE of pods/eviction, each with its own failure policy;
// with the arc-scale-set preset enabled, one for DELETE of EphemeralRunners
// with policy Ignore: the guard never refuses those, so an outage loses
// only the note of who started a runner's end.
func Validating(cfg config.Config, o Options) *admissionregistrationv1.ValidatingWebhookConfiguration {
	common := func(name string, fp admissionregistrationv1.FailurePolicyType, op admissionregistrationv1.OperationType, resource string, mc []admissionregistrationv1.MatchCondition) admissionregistrationv1.ValidatingWebhook {
		group, version := "", "v1"
		if resource == runnerpod.EphemeralRunnerResource {
			group, version = runnerpod.ARCScaleSetGroup, "v1alpha1"
		}
		return admissionregistrationv1.ValidatingWebhook{
			Name:         name,
			ClientConfig: o.ClientConfig(GuardPath),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{op},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{group}, APIVersions: []string{version},
					Resources: []string{resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			FailurePolicy:           ptr.To(fp),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			NamespaceSelector:       o.Selector(),
			ObjectSelector:          &metav1.LabelSelector{},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			TimeoutSeconds:          ptr.To(o.TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         mc,
		}
	}
	webhooks := []admissionregistrationv1.ValidatingWebhook{
		common(DeleteWebhook, o.DeleteFailurePolicy, admissionregistrationv1.Delete, "pods", DeleteMatchConditions(cfg)),
		common(EvictionWebhook, o.EvictionFailurePolicy, admissionregistrationv1.Create, "pods/eviction", exemptCondition(cfg)),
		connectWebhook(cfg, o),
	}
	if slices.ContainsFunc(cfg.Presets, func(p runnerpod.Preset) bool { return p.Name == runnerpod.ARCScaleSet && p.Enabled }) {
		webhooks = append(webhooks, common(EphemeralRunnerWebhook, admissionregistrationv1.Ignore, admissionregistrationv1.Delete,
			runnerpod.EphemeralRunnerResource, EphemeralRunnerMatchConditions(cfg)))
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Webhooks:   webhooks,
	}
}

// Mutating is the injector's configuration. Ignore: CI keeps running when
// the injector is down; pods are then admitted uninstrumented.
func Mutating(cfg config.Config, o Options) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:         InjectWebhook,
			ClientConfig: o.ClientConfig(InjectPath),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"pods"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			NamespaceSelector:       o.Selector(),
			ObjectSelector:          &metav1.LabelSelector{},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          ptr.To(o.TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.IfNeededReinvocationPolicy),
			MatchConditions: []admissionregistrationv1.MatchCondition{
				{Name: "runner-pod", Expression: "object.spec.containers.exists(c, c.name in " + celList(cfg.RunnerContainerNames()) + ")"},
				// Mirror pods are the kubelet's static pods: never touched.
				{Name: "not-mirror-pod", Expression: "!has(object.metadata.annotations) || !('kubernetes.io/config.mirror' in object.metadata.annotations)"},
			},
		}},
	}
}
