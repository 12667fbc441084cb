package check

import (
	"context"
	"slices"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// probeGuard evicts, as a dry run, a pod that does not exist: the guard's
// answer carries runnerpod.GoneWarning, and the API server then answers
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
	case slices.Contains(seen, runnerpod.GoneWarning):
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
	for i, preset := range presets.Order {
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
