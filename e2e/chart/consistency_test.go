package chart_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/check"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// renderedConfig is the webhook's config file from the rendered ConfigMap,
// read the way the server reads it.
func renderedConfig(t *testing.T, objs objects) config.Config {
	t.Helper()
	var cm corev1.ConfigMap
	objs.get(t, "ConfigMap", release, &cm)
	cfg, err := config.Parse([]byte(cm.Data["config.yaml"]))
	require.NoError(t, err, "the rendered config does not load")
	return cfg
}

// serviceClientConfig is how the API server reaches path through the
// rendered Service's webhook port.
func serviceClientConfig(t *testing.T, objs objects) func(string) admissionregistrationv1.WebhookClientConfig {
	t.Helper()
	var svc corev1.Service
	objs.get(t, "Service", release, &svc)
	var port int32
	for _, p := range svc.Spec.Ports {
		if p.Name == "webhook" {
			port = p.Port
		}
	}
	require.NotZero(t, port, "the Service has no webhook port")
	return func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Name: svc.Name, Namespace: svc.Namespace, Path: ptr.To(path), Port: ptr.To(port),
		}}
	}
}

// The chart's webhook configurations follow its values: the namespaces
// selected (never the cluster's own, runnerguard's or cert-manager's), the
// failure policies and timeout, the runner containers the API server
// matches, the exempt principals it answers for, and the EphemeralRunner
// webhook only with its preset. The suites register these same objects
// (e2e/internal/registration renders them), so what they prove of the
// webhooks is what the chart installs.
func TestWebhookConfigurations(t *testing.T) {
	fail, ignore := admissionregistrationv1.Fail, admissionregistrationv1.Ignore
	// nil: registration's default, the opt-in label. registration adds the
	// never-selected namespaces to every selector.
	var optIn *metav1.LabelSelector
	cases := []struct {
		name             string
		values           string
		selector         *metav1.LabelSelector
		certManager      string
		rollout          string
		delete, eviction admissionregistrationv1.FailurePolicyType
		timeout          int32
	}{
		{
			name:     "defaults select opted-in namespaces, judge no fleet and warn: no namespace fails closed unless labelled enforce",
			selector: optIn, rollout: "warn", delete: fail, eviction: ignore, timeout: 5,
		},
		{
			name:     "guard.rollout=enforce moves every unlabelled namespace to the enforce registrations",
			values:   "guard: {rollout: enforce}\n" + allPresets,
			selector: optIn, rollout: "enforce", delete: fail, eviction: ignore, timeout: 5,
		},
		{
			name:   "listed namespaces replace the opt-in label",
			values: "namespaces: [ci, builds]\n" + allPresets,
			selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"ci", "builds"}},
			}},
			rollout: "warn", delete: fail, eviction: ignore, timeout: 5,
		},
		{
			name: "a custom selector keeps its expressions and still excludes the release namespace",
			values: `namespaceSelector:
  matchLabels: null
  matchExpressions: [{key: team, operator: Exists}]`,
			selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: metav1.LabelSelectorOpExists},
			}},
			rollout: "warn", delete: fail, eviction: ignore, timeout: 5,
		},
		{
			name:     "cert-manager's namespace is never selected, wherever it is",
			values:   "certManager: {namespace: certs}",
			selector: optIn, certManager: "certs", rollout: "warn", delete: fail, eviction: ignore, timeout: 5,
		},
		{
			name:     "a release in cert-manager's namespace excludes it once",
			values:   "certManager: {namespace: " + namespace + "}",
			selector: optIn, certManager: namespace, rollout: "warn", delete: fail, eviction: ignore, timeout: 5,
		},
		{
			name:     "the enforce registrations' failure policies and timeout come from values",
			values:   "guard: {rollout: enforce, deleteFailurePolicy: Ignore, evictionFailurePolicy: Fail}\nwebhook: {timeoutSeconds: 12}\n" + allPresets,
			selector: optIn, rollout: "enforce", delete: ignore, eviction: fail, timeout: 12,
		},
		{
			name:     "without the budgets nothing holds a busy runner's eviction in an outage: the enforce eviction registration fails closed",
			values:   "guard: {rollout: enforce}\nmarks: {budgets: false}\n" + allPresets,
			selector: optIn, rollout: "enforce", delete: fail, eviction: fail, timeout: 5,
		},
		{
			name:     "presets not chosen leave their containers out of matchConditions",
			values:   "presets: {enabled: [generic, arc-scale-set]}",
			selector: optIn, rollout: "warn", delete: fail, eviction: ignore, timeout: 5,
		},
		{
			name:     "without the arc-scale-set preset no EphemeralRunner deletes are reviewed",
			values:   "presets: {enabled: [gitlab]}",
			selector: optIn, rollout: "warn", delete: fail, eviction: ignore, timeout: 5,
		},
		{
			name:     "renamed runner containers reach matchConditions in preset order",
			values:   "presets: {enabled: [generic, gitlab], generic: {runnerContainers: [agent, runner]}, gitlab: {runnerContainers: [build, step]}}",
			selector: optIn, rollout: "warn", delete: fail, eviction: ignore, timeout: 5,
		},
		{
			name:     "without exempt principals the eviction webhook has no matchConditions",
			values:   "guard: {exemptPrincipals: []}\n" + allPresets,
			selector: optIn, rollout: "warn", delete: fail, eviction: ignore, timeout: 5,
		},
		{
			name:     "principals with quotes and backslashes stay valid CEL strings",
			values:   `guard: {exemptPrincipals: ["system:serviceaccount:kube-system:namespace-controller", "odd\"name\\x"]}`,
			selector: optIn, rollout: "warn", delete: fail, eviction: ignore, timeout: 5,
		},
	}
	for _, h := range helms(t) {
		for _, tc := range cases {
			t.Run(h.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				objs := h.render(t, tc.values)
				cfg := renderedConfig(t, objs)
				cm := tc.certManager
				if cm == "" {
					cm = "cert-manager"
				}
				want := selectorWithout(tc.selector, cm)
				var validating admissionregistrationv1.ValidatingWebhookConfiguration
				objs.get(t, "ValidatingWebhookConfiguration", release, &validating)
				var mutating admissionregistrationv1.MutatingWebhookConfiguration
				objs.get(t, "MutatingWebhookConfiguration", release, &mutating)
				require.Len(t, mutating.Webhooks, 1)
				inj := mutating.Webhooks[0]
				assert.Equal(t, want, inj.NamespaceSelector)
				assert.Equal(t, admissionregistrationv1.Ignore, *inj.FailurePolicy, "CI goes on when the injector is down")
				assert.Equal(t, tc.timeout, *inj.TimeoutSeconds)
				containers, err := check.RunnerContainers(inj.MatchConditions)
				require.NoError(t, err)
				assert.ElementsMatch(t, cfg.RunnerContainerNames(), containers, "the injector's condition names the runner containers the server's config does")

				// Warn namespaces never fail closed.
				policies := map[string]admissionregistrationv1.FailurePolicyType{
					registration.DeleteWebhook: tc.delete, registration.EvictionWebhook: tc.eviction,
					registration.WarnDeleteWebhook: ignore, registration.WarnEvictionWebhook: ignore,
					registration.ConnectWebhook: ignore, registration.WarnConnectWebhook: ignore, registration.EphemeralRunnerWebhook: ignore,
				}
				modes := map[string]string{registration.DeleteWebhook: "enforce", registration.EvictionWebhook: "enforce",
					registration.WarnDeleteWebhook: "warn", registration.WarnEvictionWebhook: "warn",
					registration.ConnectWebhook: "enforce", registration.WarnConnectWebhook: "warn"}
				var names []string
				for _, w := range validating.Webhooks {
					names = append(names, w.Name)
					assert.Equal(t, withMode(want, modes[w.Name], tc.rollout), w.NamespaceSelector, w.Name)
					if mode := modes[w.Name]; mode != "" {
						base := registration.GuardPath
						if strings.HasPrefix(w.Name, "connect") {
							base = registration.ConnectPath
						}
						assert.Equal(t, base+"/"+mode, *w.ClientConfig.Service.Path, "%s: the guard answers in the mode of the registration that called", w.Name)
					}
					assert.Equal(t, policies[w.Name], *w.FailurePolicy, w.Name)
					assert.Equal(t, tc.timeout, *w.TimeoutSeconds, w.Name)
					exempt := slices.ContainsFunc(w.MatchConditions, func(mc admissionregistrationv1.MatchCondition) bool { return mc.Name == "not-exempt" })
					assert.Equal(t, len(cfg.Guard.ExemptPrincipals) > 0, exempt, "%s: the API server answers for the exempt principals, when there are any", w.Name)
					for _, mc := range w.MatchConditions {
						switch {
						case mc.Name == "not-exempt":
							assert.Equal(t, "!(request.userInfo.username in "+celStrings(cfg.Guard.ExemptPrincipals)+")", mc.Expression)
						case strings.Contains(mc.Expression, "c.name in") || strings.Contains(mc.Expression, "s.name in"):
							mc.Expression = strings.ReplaceAll(mc.Expression, "s.name", "c.name")
							named, err := check.RunnerContainers([]admissionregistrationv1.MatchCondition{mc})
							require.NoError(t, err)
							assert.Equal(t, containers, named, "%s/%s: the enabled presets' runner containers, as the injector's condition names them", w.Name, mc.Name)
						}
					}
				}
				arc := slices.ContainsFunc(cfg.Presets, func(p runnerpod.Preset) bool { return p.Name == arcscaleset.Name && p.Enabled })
				assert.Equal(t, arc, slices.Contains(names, registration.EphemeralRunnerWebhook), "EphemeralRunner deletes are reviewed only with the arc-scale-set preset")
				assert.Subset(t, names, []string{registration.DeleteWebhook, registration.EvictionWebhook,
					registration.WarnDeleteWebhook, registration.WarnEvictionWebhook, registration.ConnectWebhook, registration.WarnConnectWebhook})

				// The pod watcher must cover the same namespaces.
				_, c := deployment(t, objs)
				watched, err := labels.Parse(flag(c.Args, "namespace-selector"))
				require.NoError(t, err)
				selected, err := metav1.LabelSelectorAsSelector(want)
				require.NoError(t, err)
				assert.Equal(t, selected.String(), watched.String())
			})
		}
	}
}

// allPresets chooses every fleet (legacy ARC with its controller).
const allPresets = "presets: {enabled: [arc-scale-set, arc-workflow, arc-legacy, gitlab, generic], arc-legacy: {controllerPrincipals: [system:serviceaccount:arc:legacy]}}"

// withMode is sel narrowed to the namespaces of mode's registration ("":
// not a mode's, sel itself): those labelled mode, and for the rollout's
// mode those labelled neither, so each namespace is in exactly one.
func withMode(sel *metav1.LabelSelector, mode, rollout string) *metav1.LabelSelector {
	if mode == "" {
		return sel
	}
	sel = sel.DeepCopy()
	r := metav1.LabelSelectorRequirement{Key: runnerpod.ModeLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{mode}}
	if mode == rollout {
		other := map[string]string{"enforce": "warn", "warn": "enforce"}[mode]
		r = metav1.LabelSelectorRequirement{Key: runnerpod.ModeLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{other}}
	}
	sel.MatchExpressions = append(sel.MatchExpressions, r)
	return sel
}

// selectorWithout is sel (nil: the opt-in label) with the namespaces the
// webhooks never act in: the cluster's own, the release's and
// cert-manager's, each once.
func selectorWithout(sel *metav1.LabelSelector, certManager string) *metav1.LabelSelector {
	if sel == nil {
		sel = &metav1.LabelSelector{MatchLabels: map[string]string{"runnerguard.io/enabled": "true"}}
	}
	sel = sel.DeepCopy()
	never := []string{"kube-system", "kube-public", "kube-node-lease", namespace}
	if !slices.Contains(never, certManager) {
		never = append(never, certManager)
	}
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: never,
	})
	return sel
}

// celStrings is names as the chart writes a CEL list of strings.
func celStrings(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Renewing the serving certificate must never touch the webhook
// configurations: cainjector copies the CA named by inject-ca-from, and the
// serving Certificate covers the names the API server dials.
func TestServingCertificateChain(t *testing.T) {
	h := helm4(t)
	cases := []struct {
		name   string
		values string
		// issuer is the serving Certificate's issuerRef.
		issuer map[string]any
		// ownCA: the chart makes the self-signed Issuer, CA Certificate and
		// CA Issuer.
		ownCA bool
	}{
		{
			name:   "by default the chart's own CA signs the serving certificate",
			issuer: map[string]any{"group": "cert-manager.io", "kind": "Issuer", "name": "runnerguard-ca"},
			ownCA:  true,
		},
		{
			name:   "a named cluster issuer replaces the chart's CA",
			values: "certManager: {issuerRef: {name: corp-ca, kind: ClusterIssuer}}",
			issuer: map[string]any{"group": "cert-manager.io", "kind": "ClusterIssuer", "name": "corp-ca"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			objs := h.render(t, tc.values)
			var svc corev1.Service
			objs.get(t, "Service", release, &svc)

			injected := map[string]string{}
			for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
				u := objs.find(kind, release)
				require.NotNil(t, u, "no %s rendered", kind)
				injected[kind] = u.GetAnnotations()["cert-manager.io/inject-ca-from"]
			}
			assert.Equal(t, injected["ValidatingWebhookConfiguration"], injected["MutatingWebhookConfiguration"])
			certNS, certName, ok := strings.Cut(injected["ValidatingWebhookConfiguration"], "/")
			require.True(t, ok, "inject-ca-from %q is not namespace/name", injected["ValidatingWebhookConfiguration"])
			assert.Equal(t, svc.Namespace, certNS)

			serving := objs.find("Certificate", certName)
			require.NotNil(t, serving, "inject-ca-from names Certificate %q, which is not rendered", certName)
			assert.Equal(t, svc.Namespace, serving.GetNamespace())
			dnsNames, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
			assert.Equal(t, []string{svc.Name + "." + svc.Namespace + ".svc", svc.Name + "." + svc.Namespace + ".svc.cluster.local"}, dnsNames)
			issuer, _, _ := unstructured.NestedMap(serving.Object, "spec", "issuerRef")
			assert.Equal(t, tc.issuer, issuer)
			secret, _, _ := unstructured.NestedString(serving.Object, "spec", "secretName")
			assert.Equal(t, secret, mountedCertSecret(t, objs), "the Deployment must serve the serving Certificate's Secret")

			var ca []string
			for _, u := range objs {
				if u.GetAPIVersion() == "cert-manager.io/v1" && u.GetName() != certName {
					ca = append(ca, u.GetKind()+"/"+u.GetName())
				}
			}
			if !tc.ownCA {
				assert.Empty(t, ca)
				return
			}
			assert.ElementsMatch(t, []string{"Issuer/runnerguard-selfsigned", "Certificate/runnerguard-ca", "Issuer/runnerguard-ca"}, ca)
			caSecret, _, _ := unstructured.NestedString(objs.find("Issuer", "runnerguard-ca").Object, "spec", "ca", "secretName")
			caCert := objs.find("Certificate", "runnerguard-ca").Object
			caCertSecret, _, _ := unstructured.NestedString(caCert, "spec", "secretName")
			assert.Equal(t, caCertSecret, caSecret, "the CA Issuer must sign with the CA Certificate's key")
			isCA, _, _ := unstructured.NestedBool(caCert, "spec", "isCA")
			assert.True(t, isCA)
			caIssuer, _, _ := unstructured.NestedString(caCert, "spec", "issuerRef", "name")
			_, selfSigned, _ := unstructured.NestedMap(objs.find("Issuer", caIssuer).Object, "spec", "selfSigned")
			assert.True(t, selfSigned, "the CA Certificate must be signed by the self-signed Issuer")
		})
	}
}
