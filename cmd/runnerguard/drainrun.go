package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kdrain "k8s.io/kubectl/pkg/drain"

	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// check reads what is on the nodes and whether the drain may go ahead,
// changing nothing: kubectl's rules for the nodes' other pods, then every
// permission the drain needs. It returns the other pods to evict, or
// refused after saying why.
func (r *drainRun) check(ctx context.Context) ([]corev1.Pod, bool, error) {
	var others []corev1.Pod
	var namespaces, runnerNamespaces, requestNamespaces []string
	refused := false
	for _, n := range r.names {
		runners, err := r.runners.list(ctx, n)
		if apierrors.IsForbidden(err) {
			r.refuse("%v", err)
			return nil, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		for _, ru := range runners {
			namespaces = append(namespaces, ru.Pod.Namespace)
			runnerNamespaces = append(runnerNamespaces, ru.Pod.Namespace)
			requestNamespaces = append(requestNamespaces, ru.Pod.Namespace)
		}
		list, errs := r.helper.GetPodsForDeletion(n)
		for _, err := range errs {
			r.screen.Logf("refused by kubectl drain's rules for node %s's other pods: %v", n, err)
			r.report.Refused(fmt.Sprintf("kubectl drain's rules for node %s's other pods: %v", n, err))
			refused = true
		}
		if list == nil {
			continue
		}
		if w := list.Warnings(); w != "" {
			r.screen.Logf("WARNING: %s", w)
		}
		for _, p := range list.Pods() {
			others = append(others, p)
			namespaces = append(namespaces, p.Namespace)
		}
	}
	if refused {
		return nil, true, nil
	}
	if r.deadline.IsZero() {
		runnerNamespaces = nil
	}
	if r.requests != nil {
		// Eviction requests are the better way, not the only one: a
		// drainer not granted them evicts each runner pod itself.
		lacking, err := missing(ctx, r.cs, drain.RequestNeeds(requestNamespaces))
		if err != nil {
			return nil, false, err
		}
		if len(lacking) > 0 {
			r.screen.Logf("runnerguard: you may not %s: the drain evicts each runner pod itself instead", lacking[0])
			r.requests = nil
		}
	}
	lacking, err := missing(ctx, r.cs, drain.Needs(r.names, namespaces, runnerNamespaces))
	if err != nil {
		return nil, false, err
	}
	for _, p := range lacking {
		r.refuse("you may not %s", p)
	}
	return others, len(lacking) > 0, nil
}

// refuse says why the drain changes nothing, in the log and the report.
func (r *drainRun) refuse(format string, a ...any) {
	why := fmt.Sprintf(format, a...)
	r.screen.Logf("refused: %s", why)
	r.report.Refused(why)
}

// steps judges the runner pods on the nodes now.
func (r *drainRun) steps(ctx context.Context) ([]drain.Step, error) {
	var out []drain.Step
	now := time.Now()
	for _, n := range r.names {
		runners, err := r.runners.list(ctx, n)
		if err != nil {
			return nil, err
		}
		for _, ru := range runners {
			out = append(out, drain.Judge(ru, now))
		}
	}
	return out, nil
}

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

// drain cordons the nodes, hands the other pods to kubectl's drain library
// and judges the runners again at each interval until none is left.
func (r *drainRun) drain(ctx context.Context, others []corev1.Pod) (drain.Outcome, error) {
	if err := r.cordon(ctx); err != nil {
		return drain.Outcome{}, err
	}
	r.helper.OnPodDeletionOrEvictionFinished = r.otherDone
	othersDone := make(chan error, 1)
	go func() { othersDone <- r.helper.DeleteOrEvictPods(others) }()
	var othersErr error
	othersLeft := true
	evicted, ended, told := map[types.UID]bool{}, map[types.UID]bool{}, map[types.UID]bool{}
	for {
		steps, err := r.steps(ctx)
		if ctx.Err() != nil {
			return drain.Outcome{TimedOut: true, Ended: len(ended)}, nil
		}
		if err != nil {
			return drain.Outcome{}, err
		}
		now := time.Now()
		tick := drain.Next(steps, now, r.deadline)
		for _, s := range tick.End {
			if !ended[s.Pod.UID] {
				if r.requests != nil {
					if err := r.requests.withdraw(ctx, s.Pod); err != nil {
						return drain.Outcome{}, err
					}
				}
				if err := r.override(ctx, s); err != nil {
					return drain.Outcome{}, err
				}
				ended[s.Pod.UID] = true
			}
		}
		if r.requests != nil {
			if err := r.ask(ctx, tick, evicted); err != nil {
				return drain.Outcome{}, err
			}
		} else {
			for _, s := range tick.Evict {
				if err := r.evict(s, evicted, told); err != nil {
					return drain.Outcome{}, err
				}
			}
		}
		for _, s := range tick.End {
			if err := r.evict(s, evicted, told); err != nil {
				return drain.Outcome{}, err
			}
		}
		r.screen.Show(tick.Waiting, now, r.deadline)
		r.report.Waiting(waitingPods(tick.Waiting))
		select {
		case othersErr = <-othersDone:
			othersLeft = false
		default:
		}
		if othersErr != nil {
			if ctx.Err() != nil {
				return drain.Outcome{TimedOut: true, Ended: len(ended)}, nil
			}
			return drain.Outcome{}, othersErr
		}
		if len(steps) == 0 && !othersLeft {
			if r.requests != nil {
				r.requests.forget(ctx)
			}
			r.screen.Logf("node(s) %v drained", r.names)
			if len(ended) > 0 {
				r.screen.Logf("the deadline ended %d job(s)", len(ended))
			}
			return drain.Outcome{Ended: len(ended)}, nil
		}
		select {
		case <-ctx.Done():
			return drain.Outcome{TimedOut: true, Ended: len(ended)}, nil
		case <-time.After(r.o.interval):
		}
	}
}

// cordon marks the nodes unschedulable, with kubectl's cordon helper.
func (r *drainRun) cordon(ctx context.Context) error {
	for _, n := range r.nodes {
		c := kdrain.NewCordonHelper(n)
		if c.UpdateIfRequired(true) {
			if err, patchErr := c.PatchOrReplaceWithContext(ctx, r.cs, false); err != nil {
				return fmt.Errorf("cordoning node %s: %w (%v)", n.Name, err, patchErr)
			}
		}
		r.screen.Logf("node/%s cordoned", n.Name)
		r.report.Cordoned(n.Name)
	}
	return nil
}

// otherDone records what kubectl's drain library did with one of the
// node's other pods.
func (r *drainRun) otherDone(pod *corev1.Pod, usingEviction bool, err error) {
	how := "kubectl drain's rules: evicted"
	if !usingEviction {
		how = "kubectl drain's rules: deleted"
	}
	if err != nil {
		r.report.Set(drain.OtherPod(pod, drain.Failed, err.Error()))
		return
	}
	r.report.Set(drain.OtherPod(pod, drain.Evicted, how))
}

// waitingPods are the report's entries of the runners waited for.
func waitingPods(steps []drain.Step) []drain.PodReport {
	var out []drain.PodReport
	for _, s := range steps {
		why := "busy with its job"
		if s.Action == drain.Leaving {
			why = s.Why
		}
		out = append(out, drain.StepPod(s, drain.Waiting, why))
	}
	return out
}

// override sets the override on a busy runner whose job the deadline
// ends: the guard then lets its eviction through, and the record of its
// death names who evicted it.
func (r *drainRun) override(ctx context.Context, s drain.Step) error {
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, runnerpod.AllowDelete, r.reason)
	_, err := r.cs.CoreV1().Pods(s.Pod.Namespace).Patch(ctx, s.Pod.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("setting %s on %s/%s: %w", runnerpod.AllowDelete, s.Pod.Namespace, s.Pod.Name, err)
	}
	r.report.Set(drain.StepPod(s, drain.Ended, "the deadline: "+r.reason))
	r.screen.Logf("deadline reached: ending %s/%s (%s, job %s): %s=%q", s.Pod.Namespace, s.Pod.Name, s.Runner.Runner.Preset.Name, drain.JobText(s.Job), runnerpod.AllowDelete, r.reason)
	return nil
}

// ask is one look of a drain through eviction requests: each runner pod
// the guard lets go, and each it waits for, gets its request once (the
// busy ones' responders hold them and let them go when their jobs end),
// and what their Evictions say anew is shown. The deadline's runners are
// not asked for: the drain evicts them itself.
func (r *drainRun) ask(ctx context.Context, tick drain.Tick, evicted map[types.UID]bool) error {
	for _, s := range tick.Evict {
		name, _, err := r.requests.ask(ctx, s.Pod)
		if err != nil {
			return err
		}
		if !evicted[s.Pod.UID] {
			evicted[s.Pod.UID] = true
			r.report.Set(drain.StepPod(s, drain.Evicted, s.Why))
			r.screen.Logf("evicting pod %s/%s (%s): %s (eviction request %s)", s.Pod.Namespace, s.Pod.Name, s.Runner.Runner.Preset.Name, s.Why, name)
		}
	}
	for _, s := range tick.Waiting {
		if s.Action != drain.Wait {
			continue
		}
		name, made, err := r.requests.ask(ctx, s.Pod)
		if err != nil {
			return err
		}
		if made {
			r.screen.Logf("asked for the eviction of %s/%s (eviction request %s): its responders hold it while its job runs", s.Pod.Namespace, s.Pod.Name, name)
		}
	}
	news, err := r.requests.progress(ctx, tick.Waiting)
	if err != nil {
		return err
	}
	for _, s := range tick.Waiting {
		if p, ok := news[s.Pod.UID]; ok {
			r.screen.Logf("%s/%s: %s", s.Pod.Namespace, s.Pod.Name, p)
		}
	}
	return nil
}

// evict asks for a runner's eviction once. The guard may still refuse it
// (429: an idle runner was handed a job meanwhile): it is judged again at
// the next look.
func (r *drainRun) evict(s drain.Step, evicted, told map[types.UID]bool) error {
	if evicted[s.Pod.UID] {
		return nil
	}
	err := r.helper.EvictPod(*s.Pod, policyv1.SchemeGroupVersion)
	switch {
	case err == nil:
		evicted[s.Pod.UID] = true
		why := s.Why
		if s.Action == drain.Wait {
			why = "the deadline"
		} else {
			r.report.Set(drain.StepPod(s, drain.Evicted, why))
		}
		r.screen.Logf("evicting pod %s/%s (%s): %s", s.Pod.Namespace, s.Pod.Name, s.Runner.Runner.Preset.Name, why)
	case apierrors.IsNotFound(err):
		evicted[s.Pod.UID] = true
	case apierrors.IsTooManyRequests(err):
		if !told[s.Pod.UID] {
			told[s.Pod.UID] = true
			r.screen.Logf("eviction of %s/%s refused for now: %v", s.Pod.Namespace, s.Pod.Name, err)
		}
	default:
		return fmt.Errorf("evicting %s/%s: %w", s.Pod.Namespace, s.Pod.Name, err)
	}
	return nil
}
