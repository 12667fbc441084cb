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

	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/responder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// check reads what is on the nodes and whether the drain may go ahead,
// changing nothing: kubectl's rules for the nodes' other pods, then every
// permission the drain needs. It returns the other pods to evict, or
// refused after saying why.
func (r *drainRun) check(ctx context.Context) ([]corev1.Pod, bool, error) {
	var others []corev1.Pod
	var namespaces, runnerNamespaces []string
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
	if err := r.checkRequests(ctx, runnerNamespaces); err != nil {
		return nil, false, err
	}
	if r.deadline.IsZero() {
		runnerNamespaces = nil
	}
	needs := drain.Needs(r.names, namespaces, runnerNamespaces)
	if r.o.reportConditions {
		needs = append(needs, drain.ConditionNeeds(r.names)...)
	}
	lacking, err := missing(ctx, r.cs, needs)
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
		if err := r.act(ctx, tick, ended, evicted, told); err != nil {
			return drain.Outcome{}, err
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
			if err := r.reportConditions(ctx, true); err != nil {
				return drain.Outcome{}, err
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

// act does what one look says: the deadline's jobs ended (the request
// withdrawn, the override set, the pod evicted by the drain itself, so the
// record names who drained), the runners the guard lets go asked for, as
// eviction requests where served and runnerguard answers for the pod,
// else evicted.
func (r *drainRun) act(ctx context.Context, tick drain.Tick, ended, evicted, told map[types.UID]bool) error {
	for _, s := range tick.End {
		if ended[s.Pod.UID] {
			continue
		}
		if r.requests != nil {
			if err := r.requests.withdraw(ctx, s.Pod); err != nil {
				return err
			}
		}
		if err := r.override(ctx, s); err != nil {
			return err
		}
		ended[s.Pod.UID] = true
	}
	direct := tick.Evict
	if r.requests != nil {
		var asked drain.Tick
		asked.Evict, direct = drain.Answered(tick.Evict, responder.Name)
		asked.Waiting, _ = drain.Answered(tick.Waiting, responder.Name)
		asked.End = tick.End
		if err := r.ask(ctx, asked, evicted); err != nil {
			return err
		}
	}
	for _, s := range direct {
		if err := r.evict(s, evicted, told); err != nil {
			return err
		}
	}
	for _, s := range tick.End {
		if err := r.evict(s, evicted, told); err != nil {
			return err
		}
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
