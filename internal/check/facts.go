package check

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Facts are what Gather found out about one installation.
type Facts struct {
	// Release is the installation's name (its webhook configurations'),
	// "" when none was found: NotInstalled then says why.
	Release      string `json:"release,omitempty"`
	NotInstalled string `json:"notInstalled,omitempty"`
	// Namespace is the release's namespace.
	Namespace   string      `json:"namespace,omitempty"`
	Certificate Certificate `json:"certificate"`
	// CAMissing names the webhook configurations with a webhook whose CA
	// bundle is empty: the API server cannot trust the webhook's
	// certificate until cert-manager's cainjector fills it.
	CAMissing []string `json:"caMissing,omitempty"`
	// Namespaces are the namespaces the webhooks act in; NamespacesUnread
	// says why they could not be listed.
	Namespaces       []Namespace `json:"namespaces,omitempty"`
	NamespacesUnread string      `json:"namespacesUnread,omitempty"`
	// Guard and Injector are the webhooks' answers to a dry run each.
	Guard    []Probe `json:"guard,omitempty"`
	Injector []Probe `json:"injector,omitempty"`
	// Presets are those the injector's answers show on.
	Presets []runnerpod.PresetName `json:"presets,omitempty"`
	// Service is the webhooks' Service (namespace/name), "" when they are
	// reached by URL; ReadyEndpoints counts its ready endpoints, -1 when
	// they could not be read.
	Service        string `json:"service,omitempty"`
	ReadyEndpoints int    `json:"readyEndpoints"`
	// SwitchedOff: the operator's off switch is on (recorder.SwitchedOff):
	// the enforce registration answers Ignore where the chart said Fail.
	SwitchedOff bool `json:"switchedOff"`
	// ForeignBudgets are PodDisruptionBudgets (namespace/name) that are not
	// runnerguard's and select runner pods; BudgetsUnread says why they
	// could not be looked for.
	ForeignBudgets []string `json:"foreignBudgets,omitempty"`
	BudgetsUnread  string   `json:"budgetsUnread,omitempty"`
}

// Certificate is cert-manager's serving Certificate of the webhooks.
type Certificate struct {
	// Name is namespace/name, from the webhook configuration's
	// cert-manager.io/inject-ca-from annotation; "" when it has none.
	Name  string `json:"name,omitempty"`
	Ready bool   `json:"ready"`
	// Problem says why it is not ready, or could not be read.
	Problem string `json:"problem,omitempty"`
}

// Namespace is one opted-in namespace and the guard's mode there.
type Namespace struct {
	Name string      `json:"name,omitempty"`
	Mode config.Mode `json:"mode,omitempty"`
	// Labelled: the mode comes from the namespace's runnerguard.io/mode
	// label, not the chart-wide mode.
	Labelled bool `json:"labelled,omitempty"`
	// PodSecurity is its Pod Security enforce level (the label
	// pod-security.kubernetes.io/enforce), "" when none.
	PodSecurity string `json:"podSecurity,omitempty"`
}

// Probe is one webhook's answer to a dry run.
type Probe struct {
	Webhook       string `json:"webhook,omitempty"`
	FailurePolicy string `json:"failurePolicy,omitempty"`
	// Namespace is where the dry run was sent.
	Namespace string  `json:"namespace,omitempty"`
	Outcome   Outcome `json:"outcome,omitempty"`
	// Detail is the API server's error, or what the answer showed.
	Detail string        `json:"detail,omitempty"`
	Took   time.Duration `json:"tookNanoseconds"`
}

// Outcome is what a dry run showed of a webhook.
type Outcome string

// The outcomes.
const (
	// Answered: the answer carries what only the webhook writes.
	Answered Outcome = "answered"
	// Unreachable: the API server's call to the webhook failed, and its
	// failure policy Fail said so.
	Unreachable Outcome = "unreachable"
	// TimedOut: the call did not finish within the webhook's timeout.
	TimedOut Outcome = "timed out"
	// NoAnswer: the request went through without the webhook's mark, as
	// failure policy Ignore lets a failed call do.
	NoAnswer Outcome = "no answer"
	// Refused: something else refused the dry run (a policy, Pod
	// Security, the operator's own permissions).
	Refused Outcome = "refused"
	// NotProbed: no namespace the webhook acts in to send it to.
	NotProbed Outcome = "not probed"
)

// Verdict is Judge's account: no problems, or each in one line, the most
// fundamental first; and warnings, which hold nothing back but say what
// the installation leaves open or has been told to stop holding.
type Verdict struct {
	Problems []string `json:"problems,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// OK reports whether nothing is wrong.
func (v Verdict) OK() bool { return len(v.Problems) == 0 }

// Judge says what is wrong with the facts, a cause before what it causes:
// the installation, its certificate and CA (without which no call is
// trusted), the namespaces (without which nothing is reviewed or
// probed), then each webhook.
func Judge(f Facts) Verdict {
	var v Verdict
	add := func(format string, a ...any) { v.Problems = append(v.Problems, fmt.Sprintf(format, a...)) }
	if f.Release == "" {
		add("runnerguard is not installed: %s", f.NotInstalled)
		return v
	}
	switch c := f.Certificate; {
	case c.Name == "":
		add("the webhook configuration %s names no cert-manager Certificate (annotation cert-manager.io/inject-ca-from)", f.Release)
	case !c.Ready:
		add("certificate %s is not ready: %s", c.Name, c.Problem)
	}
	if len(f.CAMissing) > 0 {
		add("no CA bundle in %s yet: cert-manager's cainjector has not put the CA in, so the API server cannot trust the webhooks", strings.Join(f.CAMissing, ", "))
	}
	switch {
	case f.NamespacesUnread != "":
		add("cannot list the namespaces: %s", f.NamespacesUnread)
	case len(f.Namespaces) == 0:
		add("no namespace is opted in: label one with %s=true (nothing is reviewed, and nothing can be probed)", runnerpod.EnabledNamespaceLabel)
	}
	// The guard is registered once per mode: one mode's registration may
	// act in no namespace (or not in the one asked for) while the other's
	// answered, which proves the guard reachable.
	answered := slices.ContainsFunc(f.Guard, func(p Probe) bool { return p.Outcome == Answered })
	for _, p := range f.Guard {
		if p.Outcome == NotProbed && answered {
			continue
		}
		if problem := probeProblem("guard", "a dry-run eviction", p, f); problem != "" {
			add("%s", problem)
		}
	}
	for _, p := range f.Injector {
		if problem := probeProblem("injector", "a dry-run runner pod", p, f); problem != "" {
			add("%s", problem)
		}
	}
	if len(f.Guard) == 0 {
		add("the webhook configuration %s has no webhook for pods/eviction: the guard cannot be probed", f.Release)
	}
	if len(f.Injector) == 0 {
		add("no mutating webhook of %s injects runner pods", f.Release)
	}
	v.Warnings = cautions(f)
	return v
}

// cautions are what Judge says of an installation that works but holds
// less than it seems: the operator's off switch on, runner namespaces open
// to privileged pods, budgets of others over runner pods.
func cautions(f Facts) []string {
	var w []string
	if f.SwitchedOff {
		w = append(w, fmt.Sprintf("the operator's off switch is on: %s's enforce registration answers Ignore where the chart says Fail, so the leader keeps no budget and no busy mark there; `helm upgrade` (or the patch back to Fail) restores them", f.Release))
	}
	var open []string
	for _, n := range f.Namespaces {
		if n.PodSecurity != "baseline" && n.PodSecurity != "restricted" {
			open = append(open, n.Name)
		}
	}
	if len(open) > 0 {
		w = append(w, fmt.Sprintf("namespaces %s allow privileged pods (no %s=baseline): whoever may create pods there can start a host-PID pod on a busy runner's node and end its job around the guard; baseline closes that path, and leaves runner pods there without the vitals sidecar (it needs a hostPath)",
			strings.Join(open, ", "), podSecurityLabel))
	}
	for _, b := range f.ForeignBudgets {
		w = append(w, fmt.Sprintf("PodDisruptionBudget %s is not runnerguard's and selects runner pods: it holds idle runners' evictions too, which runnerguard's own budgets never do", b))
	}
	if f.BudgetsUnread != "" {
		w = append(w, "cannot look for others' PodDisruptionBudgets over runner pods: "+f.BudgetsUnread)
	}
	return w
}

// podSecurityLabel is Pod Security admission's enforce level on a
// namespace.
const podSecurityLabel = "pod-security.kubernetes.io/enforce"

// probeProblem is a probe's one line, or "" when the webhook answered. A
// webhook not probed for want of a namespace is already said.
func probeProblem(what, request string, p Probe, f Facts) string {
	switch p.Outcome {
	case Answered:
		return ""
	case NotProbed:
		if len(f.Namespaces) == 0 {
			return ""
		}
		return fmt.Sprintf("the %s (%s) could not be probed: %s", what, p.Webhook, p.Detail)
	case Refused:
		return fmt.Sprintf("%s in %s was refused before the %s's answer could be seen: %s", request, p.Namespace, what, p.Detail)
	}
	cause := p.Detail
	if f.Service != "" && f.ReadyEndpoints == 0 {
		cause = "no ready pod behind Service " + f.Service
	}
	line := fmt.Sprintf("the %s did not answer %s in %s (%s, %s", what, request, p.Namespace, p.Webhook, p.Outcome)
	if p.Outcome == NoAnswer {
		line += fmt.Sprintf("; failure policy %s let the request through without it", p.FailurePolicy)
	}
	line += ")"
	if cause != "" {
		line += ": " + cause
	}
	return line
}
