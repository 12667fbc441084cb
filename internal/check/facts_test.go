package check

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// healthy is an installation where all is well.
func healthy() Facts {
	return Facts{
		Release: "runnerguard", Namespace: "runnerguard", Service: "runnerguard/runnerguard", ReadyEndpoints: 2,
		Certificate: Certificate{Name: "runnerguard/runnerguard-serving-cert", Ready: true},
		Namespaces:  []Namespace{{Name: "ci", Mode: config.ModeWarn}},
		Guard:       []Probe{{Webhook: "eviction.guard.runnerguard.io", FailurePolicy: "Ignore", Namespace: "ci", Outcome: Answered, Took: 3 * time.Millisecond}},
		Injector:    []Probe{{Webhook: "inject.runnerguard.io", FailurePolicy: "Ignore", Namespace: "ci", Outcome: Answered, Took: 5 * time.Millisecond}},
		Presets:     []runnerpod.PresetName{generic.Name},
	}
}

func TestJudge(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*Facts)
		want   []string
	}{
		"a healthy installation has no problem": {
			change: func(*Facts) {},
		},
		"one mode's registration acting in no namespace is no problem while the other's answered": {
			change: func(f *Facts) {
				f.Guard = append(f.Guard, Probe{Webhook: "eviction-warn.guard.runnerguard.io", Outcome: NotProbed, Detail: "it acts in no namespace"})
			},
		},
		"no installation is said as such, and nothing else": {
			change: func(f *Facts) {
				*f = Facts{NotInstalled: "no ValidatingWebhookConfiguration labelled app.kubernetes.io/name=runnerguard"}
			},
			want: []string{"runnerguard is not installed: no ValidatingWebhookConfiguration labelled app.kubernetes.io/name=runnerguard"},
		},
		"a certificate not ready comes before the webhooks it breaks": {
			change: func(f *Facts) {
				f.Certificate = Certificate{Name: "runnerguard/runnerguard-serving-cert", Problem: "IncorrectIssuer: Issuer of the certificate is not up to date"}
				f.Guard[0].Outcome, f.Guard[0].Detail = Unreachable, "x509: certificate signed by unknown authority"
			},
			want: []string{
				"certificate runnerguard/runnerguard-serving-cert is not ready: IncorrectIssuer: Issuer of the certificate is not up to date",
				"the guard did not answer a dry-run eviction in ci (eviction.guard.runnerguard.io, unreachable): x509: certificate signed by unknown authority",
			},
		},
		"a CA bundle cainjector has not filled is said": {
			change: func(f *Facts) { f.CAMissing = []string{"MutatingWebhookConfiguration runnerguard"} },
			want:   []string{"no CA bundle in MutatingWebhookConfiguration runnerguard yet: cert-manager's cainjector has not put the CA in, so the API server cannot trust the webhooks"},
		},
		"no namespace opted in says how to opt one in, and not that the webhooks were not probed": {
			change: func(f *Facts) {
				f.Namespaces = nil
				f.Guard[0] = Probe{Webhook: "eviction.guard.runnerguard.io", Outcome: NotProbed, Detail: "it acts in no namespace"}
				f.Injector[0] = Probe{Webhook: "inject.runnerguard.io", Outcome: NotProbed, Detail: "it acts in no namespace"}
			},
			want: []string{"no namespace is opted in: label one with runnerguard.io/enabled=true (nothing is reviewed, and nothing can be probed)"},
		},
		"a guard whose pods are gone is unreachable, and its Service has no ready pod": {
			change: func(f *Facts) {
				f.ReadyEndpoints = 0
				f.Guard[0].FailurePolicy = "Fail"
				f.Guard[0].Outcome, f.Guard[0].Detail = Unreachable, `Internal error occurred: failed calling webhook "eviction.guard.runnerguard.io": no endpoints available for service "runnerguard"`
				f.Injector[0].Outcome, f.Injector[0].Detail = NoAnswer, "no dry-run runner pod came back instrumented"
			},
			want: []string{
				"the guard did not answer a dry-run eviction in ci (eviction.guard.runnerguard.io, unreachable): no ready pod behind Service runnerguard/runnerguard",
				"the injector did not answer a dry-run runner pod in ci (inject.runnerguard.io, no answer; failure policy Ignore let the request through without it): no ready pod behind Service runnerguard/runnerguard",
			},
		},
		"a guard behind failure policy Ignore that did not answer says the policy hid it": {
			change: func(f *Facts) {
				f.Guard[0].Outcome, f.Guard[0].Detail = NoAnswer, "the answer has no word from the guard"
			},
			want: []string{"the guard did not answer a dry-run eviction in ci (eviction.guard.runnerguard.io, no answer; failure policy Ignore let the request through without it): the answer has no word from the guard"},
		},
		"a webhook that timed out says so": {
			change: func(f *Facts) {
				f.Guard[0].Outcome, f.Guard[0].Detail = TimedOut, "context deadline exceeded"
			},
			want: []string{"the guard did not answer a dry-run eviction in ci (eviction.guard.runnerguard.io, timed out): context deadline exceeded"},
		},
		"a dry run refused by something else says what refused it": {
			change: func(f *Facts) {
				f.Injector[0].Outcome, f.Injector[0].Detail = Refused, `pods is forbidden: User "dana" cannot create resource "pods"`
			},
			want: []string{`a dry-run runner pod in ci was refused before the injector's answer could be seen: pods is forbidden: User "dana" cannot create resource "pods"`},
		},
		"a namespace asked for that the webhook does not act in is said": {
			change: func(f *Facts) {
				f.Guard[0] = Probe{Webhook: "eviction.guard.runnerguard.io", Outcome: NotProbed, Detail: "it does not act in namespace default"}
			},
			want: []string{"the guard (eviction.guard.runnerguard.io) could not be probed: it does not act in namespace default"},
		},
		"an installation without an eviction webhook cannot have its guard probed": {
			change: func(f *Facts) { f.Guard = nil },
			want:   []string{"the webhook configuration runnerguard has no webhook for pods/eviction: the guard cannot be probed"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := healthy()
			tc.change(&f)
			v := Judge(f)
			assert.Equal(t, tc.want, v.Problems)
			assert.Equal(t, len(tc.want) == 0, v.OK())
		})
	}
}

// What an installation leaves open is said as warnings, which hold
// nothing back: the operator's off switch, runner namespaces open to
// privileged pods, others' budgets over runner pods.
func TestCautions(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*Facts)
		want   []string
	}{
		"a namespace that enforces baseline or restricted warns of nothing": {
			change: func(f *Facts) {
				f.Namespaces = []Namespace{{Name: "ci", PodSecurity: "baseline"}, {Name: "ci-2", PodSecurity: "restricted"}}
			},
		},
		"namespaces that allow privileged pods are named": {
			change: func(f *Facts) {
				f.Namespaces = []Namespace{{Name: "ci"}, {Name: "ci-2", PodSecurity: "privileged"}, {Name: "ci-3", PodSecurity: "baseline"}}
			},
			want: []string{"namespaces ci, ci-2 allow privileged pods (no pod-security.kubernetes.io/enforce=baseline): whoever may create pods there can start a host-PID pod on a busy runner's node and end its job around the guard; baseline closes that path, and leaves runner pods there without the vitals sidecar (it needs a hostPath)"},
		},
		"the operator's off switch and others' budgets are said": {
			change: func(f *Facts) {
				f.Namespaces[0].PodSecurity = "baseline"
				f.SwitchedOff = true
				f.ForeignBudgets = []string{"ci/team-budget"}
			},
			want: []string{
				"the operator's off switch is on: runnerguard's enforce registration answers Ignore where the chart says Fail, so the leader keeps no budget and no busy mark there; `helm upgrade` (or the patch back to Fail) restores them",
				"PodDisruptionBudget ci/team-budget is not runnerguard's and selects runner pods: it holds idle runners' evictions too, which runnerguard's own budgets never do",
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := healthy()
			tc.change(&f)
			v := Judge(f)
			assert.Equal(t, tc.want, v.Warnings)
			assert.True(t, v.OK(), "warnings are no problem")
		})
	}
}

func TestReport(t *testing.T) {
	f := healthy()
	f.Namespaces = append(f.Namespaces, Namespace{Name: "ci-strict", Mode: config.ModeEnforce, Labelled: true})
	f.Presets = append(f.Presets, gitlab.Name)
	assert.Equal(t, `release      runnerguard in namespace runnerguard
certificate  runnerguard/runnerguard-serving-cert: Ready
service      runnerguard/runnerguard, ready endpoints: 2
guard        eviction.guard.runnerguard.io answered a dry-run eviction in ci in 3ms, failure policy Ignore
injector     inject.runnerguard.io answered a dry-run runner pod in ci in 5ms, failure policy Ignore
presets      generic, gitlab
namespaces   ci (warn), ci-strict (enforce, by label)
`, Report(f))

	f.Guard[0].Outcome, f.Guard[0].Detail = Unreachable, "connection refused"
	f.Certificate.Ready, f.Certificate.Problem = false, "Issuing: renewing"
	f.Namespaces = []Namespace{{Name: "ci"}}
	got := Report(f)
	assert.Contains(t, got, "certificate  runnerguard/runnerguard-serving-cert: NOT READY: Issuing: renewing\n")
	assert.Contains(t, got, "guard        eviction.guard.runnerguard.io UNREACHABLE in ci after 3ms, failure policy Ignore: connection refused\n")
	assert.Contains(t, got, "namespaces   ci (the chart's mode)\n")
	assert.Equal(t, "release  not found\n", Report(Facts{NotInstalled: "none"}))
}
