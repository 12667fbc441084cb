package check

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Options say which installation to check and where to probe.
type Options struct {
	// Release is the Helm release (label app.kubernetes.io/instance) and
	// Namespace its namespace; "" takes the cluster's only installation.
	Release, Namespace string
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

// Gather reads the installation (Find) and asks its webhooks a dry run
// each. An error means nothing could be judged: the webhook configurations
// could not be read, or Options.Release must name one of several
// installations.
func Gather(ctx context.Context, c Clients, o Options) (Facts, error) {
	f := Facts{ReadyEndpoints: -1}
	in, err := Find(ctx, c.Kube, o.Release, o.Namespace)
	var none NotInstalledError
	if errors.As(err, &none) {
		f.NotInstalled = none.Looked
		return f, nil
	}
	if err != nil {
		return f, err
	}
	vwc := in.Validating
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
	if f.Service != "" {
		f.ReadyEndpoints = readyEndpoints(ctx, c.Kube, f.Service)
	}
	nsList, err := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		f.NamespacesUnread = err.Error()
		nsList = &corev1.NamespaceList{}
	}
	enforce, known := enforceSelector(vwc)
	f.Namespaces = optedIn(nsList.Items, selectorsOf(vwc, mwc), enforce, known)
	f.SwitchedOff = recorder.SwitchedOff(vwc)
	f.ForeignBudgets, f.BudgetsUnread = foreignBudgets(ctx, c.Kube, f.Namespaces)
	probe(ctx, c, o, &f, vwc, mwc, nsList.Items)
	return f, nil
}

// probe sends each webhook of vwc and mwc its dry run, in a namespace it
// acts in, and keeps the answers in f.
func probe(ctx context.Context, c Clients, o Options, f *Facts, vwc *admissionregistrationv1.ValidatingWebhookConfiguration, mwc *admissionregistrationv1.MutatingWebhookConfiguration, nss []corev1.Namespace) {
	for _, w := range vwc.Webhooks {
		if Evicts(w) {
			ns, why := probeNamespace(w.NamespaceSelector, nss, o.ProbeNamespace)
			f.Guard = append(f.Guard, probeGuard(ctx, c, w, ns, why))
		}
	}
	for _, w := range mwc.Webhooks {
		if Injects(w) {
			ns, why := probeNamespace(w.NamespaceSelector, nss, o.ProbeNamespace)
			p, presets := probeInjector(ctx, c, w, ns, why)
			f.Injector = append(f.Injector, p)
			f.Presets = appendNew(f.Presets, presets...)
		}
	}
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

// enforceSelector is the namespaceSelector of the guard's enforce
// registration (recorder.EnforceWebhook), which selects the namespaces in
// enforce mode; known false when vwc has no such registration.
func enforceSelector(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) (*metav1.LabelSelector, bool) {
	for _, w := range vwc.Webhooks {
		if w.Name == recorder.EnforceWebhook {
			return w.NamespaceSelector, true
		}
	}
	return nil, false
}

// foreignBudgets are the PodDisruptionBudgets of the opted-in namespaces
// that are not runnerguard's (the chart's managed-by label) and select a
// runner pod: one runner pod is looked for per budget, so the cost grows
// with the others' budgets, not with the fleet. The second result says why
// they could not be read.
func foreignBudgets(ctx context.Context, kube kubernetes.Interface, nss []Namespace) ([]string, string) {
	var out []string
	for _, ns := range nss {
		pdbs, err := kube.PolicyV1().PodDisruptionBudgets(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by!=runnerguard"})
		if err != nil {
			return out, err.Error()
		}
		for _, b := range pdbs.Items {
			sel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
			if err != nil || b.Spec.Selector == nil {
				continue
			}
			req, _ := labels.NewRequirement(runnerpod.RunnerLabel, selection.Exists, nil)
			pods, err := kube.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{LabelSelector: sel.Add(*req).String(), Limit: 1})
			if err != nil {
				return out, err.Error()
			}
			if len(pods.Items) > 0 {
				out = append(out, ns.Name+"/"+b.Name)
			}
		}
	}
	return out, ""
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

func appendNew[T comparable](s []T, more ...T) []T {
	for _, m := range more {
		if !slices.Contains(s, m) {
			s = append(s, m)
		}
	}
	return s
}
