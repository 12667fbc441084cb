package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// plan says what the drain would do (--dry-run).
func (r *drainRun) plan(ctx context.Context, others []corev1.Pod) error {
	steps, err := r.steps(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, n := range r.names {
		r.screen.Logf("would cordon node %s", n)
	}
	tick := drain.Next(steps, now, time.Time{})
	for _, s := range tick.Evict {
		server := r.serverSays(ctx, s.Pod)
		r.screen.Logf("would evict now: %s/%s (%s): %s%s", s.Pod.Namespace, s.Pod.Name, s.Runner.Runner.Preset.Name, s.Why, inLog(server))
		p := drain.StepPod(s, drain.WouldEvict, s.Why)
		p.Server = server
		r.report.Set(p)
	}
	for i := range others {
		o := &others[i]
		server := r.serverSays(ctx, o)
		r.screen.Logf("would evict, by kubectl drain's rules: %s/%s%s", o.Namespace, o.Name, inLog(server))
		p := drain.OtherPod(o, drain.WouldEvict, "kubectl drain's rules")
		p.Server = server
		r.report.Set(p)
	}
	for _, s := range tick.Waiting {
		r.screen.Logf("would wait for its job: %s", drain.Line(s, now))
		r.report.Set(drain.StepPod(s, drain.WouldWait, "busy with its job"))
	}
	if !r.deadline.IsZero() {
		r.screen.Logf("at %s would set %s=%q on the runners still busy and evict them", r.deadline.UTC().Format(time.RFC3339), runnerpod.AllowDelete, r.reason)
	} else if len(tick.Waiting) > 0 {
		r.screen.Logf("no --deadline: would wait for every job to end (or for --timeout)")
	}
	r.screen.Logf("dry run: nothing was changed")
	return nil
}

// serverSays is, with --dry-run=server, what the API server answers the
// pod's eviction as a dry run: the guard and the disruption budgets judge
// it, and nothing changes; "" otherwise.
func (r *drainRun) serverSays(ctx context.Context, pod *corev1.Pod) string {
	if r.o.dryRun != "server" {
		return ""
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
	if err := r.cs.PolicyV1().Evictions(pod.Namespace).Evict(ctx, ev); err != nil {
		return "the API server would refuse it now: " + err.Error()
	}
	return "the API server would allow it now"
}

// inLog is the server's answer as the end of a log line.
func inLog(server string) string {
	if server == "" {
		return ""
	}
	return "; " + server
}
