package registration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

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

// Webhook names, as they appear in API server errors and metrics. A name
// the chart does not render fails Webhook's lookup. The delete and
// eviction registrations come in two: enforce namespaces' (DeleteWebhook,
// EvictionWebhook) and warn namespaces' (never failing closed).
const (
	DeleteWebhook          = "delete.guard.runnerguard.io"
	EvictionWebhook        = "eviction.guard.runnerguard.io"
	WarnDeleteWebhook      = "delete-warn.guard.runnerguard.io"
	WarnEvictionWebhook    = "eviction-warn.guard.runnerguard.io"
	ConnectWebhook         = "connect.guard.runnerguard.io"
	WarnConnectWebhook     = "connect-warn.guard.runnerguard.io"
	InjectWebhook          = "inject.runnerguard.io"
	EphemeralRunnerWebhook = "ephemeralrunner-delete.guard.runnerguard.io"
)

// Options are the installation's choices around the config, as the chart's
// values and Helm's release take them.
type Options struct {
	// Name is the release's name; the chart names its objects after it
	// (its full name: the release's, with "-runnerguard" unless it has it).
	Name string
	// ClientConfig returns how the API server reaches path: a URL in tests,
	// in place of the chart's Service.
	ClientConfig func(path string) admissionregistrationv1.WebhookClientConfig
	// NamespaceSelector picks the protected namespaces (values
	// namespaceSelector); nil keeps the chart's opt-in label.
	NamespaceSelector *metav1.LabelSelector
	// ReleaseNamespace is the release's namespace ("runnerguard" when
	// empty): runnerguard's ServiceAccount lives there, and the webhooks
	// never act there.
	ReleaseNamespace string
	// CertManagerNamespace is cert-manager's (values certManager.namespace;
	// the chart's default when empty).
	CertManagerNamespace string
	// The guard's failure policies and the webhooks' timeout (values
	// guard.*FailurePolicy, webhook.timeoutSeconds); empty or zero keeps
	// the chart's defaults.
	DeleteFailurePolicy   admissionregistrationv1.FailurePolicyType
	EvictionFailurePolicy admissionregistrationv1.FailurePolicyType
	TimeoutSeconds        int32
	// InjectPolicy renders the injection as a MutatingAdmissionPolicy
	// (values inject.policy: true), and the injector's webhook for the pods
	// it hands over.
	InjectPolicy bool
}

// Objects are the registration objects the chart renders for a release.
type Objects struct {
	Validating *admissionregistrationv1.ValidatingWebhookConfiguration
	Mutating   *admissionregistrationv1.MutatingWebhookConfiguration
	// Policy and Binding: who may write the guard's signals on runner
	// pods, in the webhooks' namespaces.
	Policy  *admissionregistrationv1.ValidatingAdmissionPolicy
	Binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// OverridePolicy and OverrideBinding: who may write the override, in
	// every namespace the webhooks could ever act in.
	OverridePolicy  *admissionregistrationv1.ValidatingAdmissionPolicy
	OverrideBinding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// NamespacePolicy and NamespaceBinding: who may change a namespace's
	// opt-in and mode labels.
	NamespacePolicy  *admissionregistrationv1.ValidatingAdmissionPolicy
	NamespaceBinding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// NodePolicy and NodeBinding: who may set a node's drain deadline.
	NodePolicy  *admissionregistrationv1.ValidatingAdmissionPolicy
	NodeBinding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// BudgetPolicy and BudgetBinding: who may write the label the busy
	// runners' PodDisruptionBudget selects their pods by, and the budget.
	BudgetPolicy  *admissionregistrationv1.ValidatingAdmissionPolicy
	BudgetBinding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// CreatorPolicy and CreatorBinding: the API server's record of each
	// runner pod's creator (inject.creatorPolicy; Kubernetes 1.36 and
	// later); nil with InjectPolicy, which records it.
	CreatorPolicy  *admissionregistrationv1.MutatingAdmissionPolicy
	CreatorBinding *admissionregistrationv1.MutatingAdmissionPolicyBinding
	// InjectPolicy and InjectBinding: the injection in the API server
	// (Options.InjectPolicy); nil without it.
	InjectPolicy  *admissionregistrationv1.MutatingAdmissionPolicy
	InjectBinding *admissionregistrationv1.MutatingAdmissionPolicyBinding
	// RecordPolicy and RecordBinding: who may remove the finalizer that
	// says a fleet's record's job is over; nil where the chart renders
	// none (no enabled fleet with such a finalizer names its controllers).
	RecordPolicy  *admissionregistrationv1.ValidatingAdmissionPolicy
	RecordBinding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	// OverrideRole is the ClusterRole that grants the override permission,
	// OptInRole the one that grants the opt-in permission.
	OverrideRole *rbacv1.ClusterRole
	OptInRole    *rbacv1.ClusterRole
}

// PolicyObjects are the policies, their bindings and the roles that grant
// their permissions: what a suite registers to run under the chart's
// policies.
func (o *Objects) PolicyObjects() []client.Object {
	objs := []client.Object{o.Policy, o.Binding, o.OverridePolicy, o.OverrideBinding,
		o.NamespacePolicy, o.NamespaceBinding, o.NodePolicy, o.NodeBinding, o.BudgetPolicy, o.BudgetBinding, o.OverrideRole, o.OptInRole}
	if o.RecordPolicy != nil {
		objs = append(objs, o.RecordPolicy, o.RecordBinding)
	}
	return objs
}

// CreatorObjects are the policy that records each runner pod's creator in
// the API server and its binding, which a suite registers where the API
// server serves MutatingAdmissionPolicy (Kubernetes 1.36 and later).
func (o *Objects) CreatorObjects() []client.Object {
	return []client.Object{o.CreatorPolicy, o.CreatorBinding}
}

// InjectPolicyObjects are the injection's policy and the injector's
// webhook, as the chart registers them with inject.policy on
// (Options.InjectPolicy), bound to the namespaces sel selects alone: a suite
// runs them beside the webhook's path on one API server.
func (o *Objects) InjectPolicyObjects(sel *metav1.LabelSelector) []client.Object {
	o.InjectBinding.Spec.MatchResources.NamespaceSelector = sel
	for i := range o.Mutating.Webhooks {
		o.Mutating.Webhooks[i].NamespaceSelector = sel
	}
	return []client.Object{o.InjectPolicy, o.InjectBinding, o.Mutating}
}

// Webhook is the validating webhook named name.
func (o *Objects) Webhook(name string) (admissionregistrationv1.ValidatingWebhook, error) {
	for _, w := range o.Validating.Webhooks {
		if w.Name == name {
			return w, nil
		}
	}
	return admissionregistrationv1.ValidatingWebhook{}, fmt.Errorf("the chart renders no validating webhook %q", name)
}

// Render renders the chart for cfg and o with Helm ($HELM, else the
// repository's .cache/bin/helm that `hack/tools.sh helm` builds), checks
// that the config the chart renders is cfg in every part the registration
// objects are built from, and points the webhooks at o.ClientConfig.
func Render(cfg config.Config, o Options) (*Objects, error) {
	if o.ReleaseNamespace == "" {
		o.ReleaseNamespace = "runnerguard"
	}
	vals, err := values(cfg, o)
	if err != nil {
		return nil, err
	}
	docs, err := template(o, vals)
	if err != nil {
		return nil, err
	}
	if err := sameConfig(cfg, fullname(o.Name), docs); err != nil {
		return nil, err
	}
	var objs Objects
	full := fullname(o.Name)
	for _, want := range []struct {
		kind, name string
		out        any
	}{
		{"ValidatingWebhookConfiguration", full, &objs.Validating},
		{"MutatingWebhookConfiguration", full, &objs.Mutating},
		{"ValidatingAdmissionPolicy", full, &objs.Policy},
		{"ValidatingAdmissionPolicyBinding", full, &objs.Binding},
		{"ValidatingAdmissionPolicy", full + "-override", &objs.OverridePolicy},
		{"ValidatingAdmissionPolicyBinding", full + "-override", &objs.OverrideBinding},
		{"ValidatingAdmissionPolicy", full + "-namespaces", &objs.NamespacePolicy},
		{"ValidatingAdmissionPolicyBinding", full + "-namespaces", &objs.NamespaceBinding},
		{"ValidatingAdmissionPolicy", full + "-nodes", &objs.NodePolicy},
		{"ValidatingAdmissionPolicyBinding", full + "-nodes", &objs.NodeBinding},
		{"ValidatingAdmissionPolicy", full + "-budget", &objs.BudgetPolicy},
		{"ValidatingAdmissionPolicyBinding", full + "-budget", &objs.BudgetBinding},
		{"ClusterRole", full + "-override", &objs.OverrideRole},
		{"ClusterRole", full + "-opt-in", &objs.OptInRole},
	} {
		if err := docs.get(want.kind, want.name, want.out); err != nil {
			return nil, err
		}
	}
	// The injection policy records the creator itself; without it, the
	// creator's policy does.
	policy, policyBinding := &objs.CreatorPolicy, &objs.CreatorBinding
	suffix := "-creator"
	if o.InjectPolicy {
		policy, policyBinding, suffix = &objs.InjectPolicy, &objs.InjectBinding, "-inject"
	}
	if err := docs.get("MutatingAdmissionPolicy", full+suffix, policy); err != nil {
		return nil, err
	}
	if err := docs.get("MutatingAdmissionPolicyBinding", full+suffix, policyBinding); err != nil {
		return nil, err
	}
	if docs.has("ValidatingAdmissionPolicy", full+"-fleet-records") {
		if err := docs.get("ValidatingAdmissionPolicy", full+"-fleet-records", &objs.RecordPolicy); err != nil {
			return nil, err
		}
		if err := docs.get("ValidatingAdmissionPolicyBinding", full+"-fleet-records", &objs.RecordBinding); err != nil {
			return nil, err
		}
	}
	if o.ClientConfig != nil {
		for i := range objs.Validating.Webhooks {
			objs.Validating.Webhooks[i].ClientConfig = redirect(o, objs.Validating.Webhooks[i].ClientConfig)
		}
		for i := range objs.Mutating.Webhooks {
			objs.Mutating.Webhooks[i].ClientConfig = redirect(o, objs.Mutating.Webhooks[i].ClientConfig)
		}
	}
	return &objs, nil
}

// redirect is o's client config for the path the chart's Service reference
// names.
func redirect(o Options, cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
	path := ""
	if cc.Service != nil && cc.Service.Path != nil {
		path = *cc.Service.Path
	}
	return o.ClientConfig(path)
}

// values are the chart values that make it render cfg and o. Every preset
// is given whole, and a preset cfg leaves out is disabled, so none of the
// chart's defaults leaks in where cfg says otherwise.
func values(cfg config.Config, o Options) (map[string]any, error) {
	presets := map[string]any{}
	enabled := []string{}
	for _, p := range cfg.Presets {
		if p.Enabled {
			enabled = append(enabled, string(p.Name))
		}
		var m map[string]any
		if err := roundTrip(p, &m); err != nil {
			return nil, err
		}
		delete(m, "name")
		delete(m, "enabled")
		// Lists cfg leaves out are empty, not the chart's defaults.
		for _, k := range []string{"diagnosticEnv", "controllerPrincipals", "ownerPrincipals"} {
			if _, ok := m[k]; !ok {
				m[k] = []any{}
			}
		}
		presets[string(p.Name)] = m
	}
	presets["enabled"] = enabled
	guardValues := map[string]any{"rollout": cfg.Guard.Mode, "exemptPrincipals": nonNil(cfg.Guard.ExemptPrincipals)}
	if len(cfg.Guard.ZombieReapers) > 0 {
		guardValues["zombieReapers"] = cfg.Guard.ZombieReapers
	}
	if o.DeleteFailurePolicy != "" {
		guardValues["deleteFailurePolicy"] = o.DeleteFailurePolicy
	}
	if o.EvictionFailurePolicy != "" {
		guardValues["evictionFailurePolicy"] = o.EvictionFailurePolicy
	}
	// The injector's part of cfg, with the policies: rendered whatever the
	// server, a suite registers them where served (CreatorObjects).
	var inject map[string]any
	if err := roundTrip(cfg.Inject, &inject); err != nil {
		return nil, err
	}
	if inject["podSecurityDefault"] == nil {
		inject["podSecurityDefault"] = ""
	}
	inject["creatorPolicy"], inject["policy"] = true, o.InjectPolicy
	v := map[string]any{
		"inject":  inject,
		"presets": presets,
		"guard":   guardValues,
		"policy":  map[string]any{"garbageCollectors": nonNil(cfg.Policy.GarbageCollectors)},
	}
	if o.TimeoutSeconds != 0 {
		v["webhook"] = map[string]any{"timeoutSeconds": o.TimeoutSeconds}
	}
	if o.NamespaceSelector != nil {
		var sel map[string]any
		if err := roundTrip(o.NamespaceSelector, &sel); err != nil {
			return nil, err
		}
		// A selector replaces the chart's whole: Helm merges maps, so the
		// opt-in label is dropped with a null.
		labels, _ := sel["matchLabels"].(map[string]any)
		if labels == nil {
			labels = map[string]any{}
		}
		if _, ok := labels[runnerpod.EnabledNamespaceLabel]; !ok {
			labels[runnerpod.EnabledNamespaceLabel] = nil
		}
		exprs, _ := sel["matchExpressions"].([]any)
		v["namespaceSelector"] = map[string]any{"matchLabels": labels, "matchExpressions": append([]any{}, exprs...)}
	}
	if o.CertManagerNamespace != "" {
		v["certManager"] = map[string]any{"namespace": o.CertManagerNamespace}
	}
	return v, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func roundTrip(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// sameConfig checks that the config the chart renders is cfg in what the
// registration objects are built from: a values key this package does not
// set, or one the chart drops, would otherwise go unnoticed.
func sameConfig(cfg config.Config, name string, docs documents) error {
	var cm *corev1.ConfigMap
	if err := docs.get("ConfigMap", name, &cm); err != nil {
		return err
	}
	got, err := config.Parse([]byte(cm.Data["config.yaml"]))
	if err != nil {
		return fmt.Errorf("the chart's config for these values does not load: %w", err)
	}
	// The chart's mode is in the registrations (one per mode, by namespace
	// selector), not in the config: compare the rest.
	wantGuard, haveGuard := cfg.Guard, got.Guard
	wantGuard.Mode, haveGuard.Mode = "", ""
	for _, part := range []struct {
		name       string
		want, have any
	}{
		{"presets", cfg.Presets, got.Presets},
		{"guard", wantGuard, haveGuard},
		{"policy", cfg.Policy, got.Policy},
		{"inject", cfg.Inject, got.Inject},
	} {
		if !equality.Semantic.DeepEqual(part.want, part.have) {
			w, _ := json.Marshal(part.want)
			h, _ := json.Marshal(part.have)
			return fmt.Errorf("the chart renders %s %s for the config's %s", part.name, h, w)
		}
	}
	return nil
}

// root is the repository's root: the nearest folder above the working
// directory (a test's package) whose go.mod is runnerguard's. Not this
// file's compiled path, which -trimpath makes a module path.
func root() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		if mod, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(mod, []byte("module github.com/runnerguard/runnerguard\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}

// Helm is the Helm binary Render runs: $HELM, else the repository's
// .cache/bin/helm that `hack/tools.sh helm` builds. The error says how to
// get one: a test without Helm skips with it, as e2e/chart's do.
func Helm() (string, error) {
	helm := os.Getenv("HELM")
	if helm == "" {
		helm = filepath.Join(root(), ".cache", "bin", "helm")
	}
	if _, err := os.Stat(helm); err != nil {
		return "", fmt.Errorf("no Helm to render the chart with (set $HELM, or run hack/tools.sh helm; make unit and make drift build it): %w", err)
	}
	return helm, nil
}

// template runs `helm template` for o with vals.
func template(o Options, vals map[string]any) (documents, error) {
	helm, err := Helm()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "runnerguard-registration")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b, err := json.Marshal(vals)
	if err != nil {
		return nil, err
	}
	valuesFile := filepath.Join(dir, "values.json")
	if err := os.WriteFile(valuesFile, b, 0o600); err != nil {
		return nil, err
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(helm, "template", o.Name, filepath.Join(root(), "charts", "runnerguard"),
		"--namespace", o.ReleaseNamespace, "--values", valuesFile)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No repositories or plugins of the user's leak in.
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(dir, "config"),
		"HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HELM_DATA_HOME="+filepath.Join(dir, "data"))
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm template: %s: %w", strings.TrimSpace(stderr.String()), err)
	}
	return parse(stdout.Bytes())
}

// documents are the objects of a rendered chart.
type documents []*unstructured.Unstructured

func parse(manifest []byte) (documents, error) {
	var docs documents
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) > 0 {
			docs = append(docs, &unstructured.Unstructured{Object: m})
		}
	}
}

// fullname is the prefix of the chart's object names for release name
// (runnerguard.fullname, without the overrides Render never sets).
func fullname(release string) string {
	full := release
	if !strings.Contains(release, "runnerguard") {
		full += "-runnerguard"
	}
	if len(full) > 63 {
		full = full[:63]
	}
	return strings.TrimSuffix(full, "-")
}

// get converts the one object of kind named name into out, a pointer to a
// typed object's pointer.
// has reports whether the chart renders a kind of that name.
func (d documents) has(kind, name string) bool {
	for _, u := range d {
		if u.GetKind() == kind && u.GetName() == name {
			return true
		}
	}
	return false
}

func (d documents) get(kind, name string, out any) error {
	var found *unstructured.Unstructured
	for _, u := range d {
		if u.GetKind() != kind || u.GetName() != name {
			continue
		}
		if found != nil {
			return fmt.Errorf("the chart renders more than one %s named %s", kind, name)
		}
		found = u
	}
	if found == nil {
		return fmt.Errorf("the chart renders no %s named %s", kind, name)
	}
	b, err := json.Marshal(found.Object)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %q does not fit its Go type: %w", kind, found.GetName(), err)
	}
	return nil
}
