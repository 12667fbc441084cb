package check

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/webhook/guard"
)

// Options say which installation to check and where to probe.
type Options struct {
	// Release is the Helm release (label app.kubernetes.io/instance); ""
	// takes the cluster's only installation.
	Release string
	// ProbeNamespace is where the dry runs go; "" takes the first opted-in
	// namespace each webhook acts in.
	ProbeNamespace string
}

// Clients are what Gather reads and probes with: Kube for the reads,
// Probing for each dry run, a client whose admission warnings go to warn.
type Clients struct {
	Kube    kubernetes.Interface
	Probing func(warn func(string)) (kubernetes.Interface, error)
	Config  *rest.Config
}

// NewClients are the clients of cfg, the operator's kubeconfig.
func NewClients(cfg *rest.Config) (Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, err
	}
	return Clients{Kube: kube, Config: cfg, Probing: func(warn func(string)) (kubernetes.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.WarningHandler = warnings(warn)
		return kubernetes.NewForConfig(c)
	}}, nil
}

type warnings func(string)

func (w warnings) HandleWarningHeader(_ int, _ string, text string) { w(text) }

// installLabel is the label every object of the chart carries.
const installLabel = "app.kubernetes.io/name=runnerguard"

// Gather reads the installation and asks its webhooks a dry run each. An
// error means nothing could be judged: the webhook configurations could
// not be read, or Options.Release must name one of several installations.
func Gather(ctx context.Context, c Clients, o Options) (Facts, error) {
	f := Facts{ReadyEndpoints: -1}
	sel := installLabel
	if o.Release != "" {
		sel += ",app.kubernetes.io/instance=" + o.Release
	}
	list, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return f, fmt.Errorf("reading the webhook configurations: %w", err)
	}
	switch len(list.Items) {
	case 0:
		f.NotInstalled = "no ValidatingWebhookConfiguration labelled " + sel
		return f, nil
	case 1:
	default:
		var names []string
		for _, v := range list.Items {
			names = append(names, v.Labels["app.kubernetes.io/instance"])
		}
		return f, fmt.Errorf("%d runnerguard installations (releases %s): name one with --release", len(names), strings.Join(names, ", "))
	}
	vwc := &list.Items[0]
	f.Release = vwc.Name
	mwc, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, vwc.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return f, fmt.Errorf("reading the injector's webhook configuration: %w", err)
	}
	if apierrors.IsNotFound(err) {
		mwc = &admissionregistrationv1.MutatingWebhookConfiguration{}
	}
	f.Namespace, f.Service = service(vwc)
	f.Certificate = certificate(ctx, c, vwc.Annotations["cert-manager.io/inject-ca-from"])
	f.CAMissing = caMissing(vwc, mwc)
	f.ChartMode = chartMode(ctx, c.Kube, f.Namespace, vwc.Name)
	if f.Service != "" {
		f.ReadyEndpoints = readyEndpoints(ctx, c.Kube, f.Service)
	}
	nsList, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		f.NamespacesUnread = err.Error()
		nsList = &corev1.NamespaceList{}
	}
	selectors := selectorsOf(vwc, mwc)
	for _, ns := range nsList.Items {
		if selectedByAny(selectors, ns.Labels) {
			mode := config.ModeFor(ns.Labels, f.ChartMode)
			labelled := mode != "" && ns.Labels[runnerpod.ModeLabel] == string(mode)
			f.Namespaces = append(f.Namespaces, Namespace{Name: ns.Name, Mode: mode, Labelled: labelled})
		}
	}
	sort.Slice(f.Namespaces, func(i, j int) bool { return f.Namespaces[i].Name < f.Namespaces[j].Name })
	for _, w := range vwc.Webhooks {
		if Evicts(w) {
			ns, why := probeNamespace(w.NamespaceSelector, nsList.Items, o.ProbeNamespace)
			f.Guard = append(f.Guard, probeGuard(ctx, c, w, ns, why))
		}
	}
	for _, w := range mwc.Webhooks {
		if Injects(w) {
			ns, why := probeNamespace(w.NamespaceSelector, nsList.Items, o.ProbeNamespace)
			p, presets := probeInjector(ctx, c, w, ns, why)
			f.Injector = append(f.Injector, p)
			f.Presets = appendNew(f.Presets, presets...)
		}
	}
	return f, nil
}

// service is the webhooks' Service as namespace/name and its namespace,
// the release's; a configuration reached by URL (the API-server suite)
// names its namespace only in its CA annotation.
func service(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) (string, string) {
	for _, w := range vwc.Webhooks {
		if s := w.ClientConfig.Service; s != nil {
			return s.Namespace, s.Namespace + "/" + s.Name
		}
	}
	ns, _, _ := strings.Cut(vwc.Annotations["cert-manager.io/inject-ca-from"], "/")
	return ns, ""
}

func caMissing(vwc *admissionregistrationv1.ValidatingWebhookConfiguration, mwc *admissionregistrationv1.MutatingWebhookConfiguration) []string {
	var missing []string
	for _, w := range vwc.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			missing = append(missing, "ValidatingWebhookConfiguration "+vwc.Name)
			break
		}
	}
	for _, w := range mwc.Webhooks {
		if len(w.ClientConfig.CABundle) == 0 {
			missing = append(missing, "MutatingWebhookConfiguration "+mwc.Name)
			break
		}
	}
	return missing
}

// chartMode is the chart-wide mode in the release's config (the ConfigMap
// named as the webhook configurations), "" when it cannot be read.
func chartMode(ctx context.Context, kube kubernetes.Interface, ns, name string) config.Mode {
	if ns == "" {
		return ""
	}
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	cfg, err := config.Parse([]byte(cm.Data["config.yaml"]))
	if err != nil {
		return ""
	}
	return cfg.Guard.Mode
}

// readyEndpoints counts the ready endpoints behind the Service; -1 when
// they cannot be read.
func readyEndpoints(ctx context.Context, kube kubernetes.Interface, svc string) int {
	ns, name, _ := strings.Cut(svc, "/")
	list, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return -1
	}
	n := 0
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				n++
			}
		}
	}
	return n
}

func selectorsOf(vwc *admissionregistrationv1.ValidatingWebhookConfiguration, mwc *admissionregistrationv1.MutatingWebhookConfiguration) []*metav1.LabelSelector {
	var out []*metav1.LabelSelector
	for _, w := range vwc.Webhooks {
		out = append(out, w.NamespaceSelector)
	}
	for _, w := range mwc.Webhooks {
		out = append(out, w.NamespaceSelector)
	}
	return out
}

func selectedByAny(selectors []*metav1.LabelSelector, nsLabels map[string]string) bool {
	return slices.ContainsFunc(selectors, func(s *metav1.LabelSelector) bool { return selects(s, nsLabels) })
}

// selects is the API server's reading of a webhook's namespaceSelector:
// none selects every namespace.
func selects(s *metav1.LabelSelector, nsLabels map[string]string) bool {
	if s == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(labels.Set(nsLabels))
}

// probeNamespace is the namespace a webhook is probed in: the one asked
// for, or the first (by name) it acts in; else "" and why.
func probeNamespace(s *metav1.LabelSelector, nss []corev1.Namespace, asked string) (string, string) {
	var names []string
	for _, ns := range nss {
		if selects(s, ns.Labels) {
			names = append(names, ns.Name)
		}
	}
	sort.Strings(names)
	switch {
	case asked != "" && slices.Contains(names, asked):
		return asked, ""
	case asked != "":
		return "", fmt.Sprintf("it does not act in namespace %s", asked)
	case len(names) == 0:
		return "", "it acts in no namespace"
	}
	return names[0], ""
}

// probeGuard evicts, as a dry run, a pod that does not exist: the guard's
// answer carries guard.GoneWarning, and the API server then answers
// NotFound; nothing is evicted either way.
func probeGuard(ctx context.Context, c Clients, w admissionregistrationv1.ValidatingWebhook, ns, why string) Probe {
	p := Probe{Webhook: w.Name, FailurePolicy: policy(w.FailurePolicy), Namespace: ns}
	if ns == "" {
		p.Outcome, p.Detail = NotProbed, why
		return p
	}
	var seen []string
	kube, err := c.Probing(func(text string) { seen = append(seen, text) })
	if err != nil {
		p.Outcome, p.Detail = Refused, err.Error()
		return p
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: ProbePrefix + utilrand.String(8), Namespace: ns},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
	start := time.Now()
	err = kube.PolicyV1().Evictions(ns).Evict(ctx, ev)
	p.Took = time.Since(start)
	switch {
	case slices.Contains(seen, guard.GoneWarning):
		p.Outcome = Answered
	case err == nil || apierrors.IsNotFound(err):
		p.Outcome, p.Detail = NoAnswer, "the answer has no word from the guard"
	default:
		p.Outcome, p.Detail = Failed(err.Error()), err.Error()
	}
	return p
}

// probeInjector creates, as a dry run, one pod shaped as each preset's
// runner pod: the injector's answers show that it answered and which
// presets are on.
func probeInjector(ctx context.Context, c Clients, w admissionregistrationv1.MutatingWebhook, ns, why string) (Probe, []runnerpod.PresetName) {
	p := Probe{Webhook: w.Name, FailurePolicy: policy(w.FailurePolicy), Namespace: ns}
	containers, err := RunnerContainers(w.MatchConditions)
	if ns == "" || err != nil {
		p.Outcome, p.Detail = NotProbed, why
		if err != nil {
			p.Detail = err.Error()
		}
		return p, nil
	}
	kube, err := c.Probing(func(string) {})
	if err != nil {
		p.Outcome, p.Detail = Refused, err.Error()
		return p, nil
	}
	var on []runnerpod.PresetName
	p.Outcome, p.Detail = NoAnswer, "no dry-run runner pod came back instrumented"
	for i, preset := range runnerpod.Order {
		start := time.Now()
		got, err := kube.CoreV1().Pods(ns).Create(ctx, ProbePod(ns, preset, containers), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if i == 0 {
			p.Took = time.Since(start)
		}
		if err != nil {
			p.Outcome, p.Detail = Failed(err.Error()), RefusalDetail(err.Error())
			break
		}
		if matched := InjectedPreset(got); matched != "" {
			p.Outcome, p.Detail = Answered, ""
			if matched == preset {
				on = append(on, preset)
			}
		}
	}
	return p, on
}

func policy(p *admissionregistrationv1.FailurePolicyType) string {
	if p == nil {
		return string(admissionregistrationv1.Fail) // the API's default
	}
	return string(*p)
}

func appendNew[T comparable](s []T, more ...T) []T {
	for _, m := range more {
		if !slices.Contains(s, m) {
			s = append(s, m)
		}
	}
	return s
}
