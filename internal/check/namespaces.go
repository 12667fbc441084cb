package check

import (
	"fmt"
	"slices"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// optedIn are the namespaces any of the webhooks acts in, by name, with
// the guard's mode in each as the API server chooses it: enforce where the
// enforce registration (enforce, its namespaceSelector) selects the
// namespace, else warn; with no enforce registration (known false), the
// namespace's label, else "" (not known).
func optedIn(nss []corev1.Namespace, selectors []*metav1.LabelSelector, enforce *metav1.LabelSelector, known bool) []Namespace {
	var out []Namespace
	for _, ns := range nss {
		if selectedByAny(selectors, ns.Labels) {
			mode := config.ModeFor(ns.Labels, "")
			if known {
				mode = config.ModeWarn
				if selects(enforce, ns.Labels) {
					mode = config.ModeEnforce
				}
			}
			labelled := mode != "" && ns.Labels[runnerpod.ModeLabel] == string(mode)
			out = append(out, Namespace{Name: ns.Name, Mode: mode, Labelled: labelled, PodSecurity: ns.Labels[podSecurityLabel]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
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
