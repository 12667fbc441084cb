package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/printable"
	"github.com/runnerguard/runnerguard/internal/responder"
)

// requests is a drain through eviction requests, where the API server
// serves them: one EvictionRequest per runner pod, asked once, whose
// Eviction's responders (runnerguard's leader first) let the pod go when
// the guard would, so the drain asks and watches instead of retrying a
// refused eviction.
type requests struct {
	dyn dynamic.Interface
	// made are the drain's requests by pod UID, each pod's namespace and
	// the request's name.
	made map[types.UID]types.NamespacedName
	// said is the progress last shown of each pod's Eviction.
	said map[types.UID]string
	// asked is each pod asked for as the drain last judged it.
	asked map[types.UID]drain.Step
}

func newRequests(dyn dynamic.Interface) *requests {
	return &requests{dyn: dyn, made: map[types.UID]types.NamespacedName{}, said: map[types.UID]string{}, asked: map[types.UID]drain.Step{}}
}

func (q *requests) res(ns string) dynamic.ResourceInterface {
	return q.dyn.Resource(responder.EvictionRequests).Namespace(ns)
}

// ask makes pod's EvictionRequest unless the drain has; it reports whether
// it made it now. A request of that name left by an earlier drain is
// taken over when it targets this pod, and replaced when it targets
// another of the same name.
func (q *requests) ask(ctx context.Context, pod *corev1.Pod) (string, bool, error) {
	if k, ok := q.made[pod.UID]; ok {
		return k.Name, false, nil
	}
	name := drain.RequestName(pod.Name)
	er := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": responder.GroupVersion.String(), "kind": "EvictionRequest",
		"metadata": map[string]any{"name": name, "namespace": pod.Namespace},
		"spec": map[string]any{
			"target":    map[string]any{"pod": map[string]any{"name": pod.Name, "uid": string(pod.UID)}},
			"requester": drain.Requester, "intent": "Eviction",
		},
	}}
	_, err := q.res(pod.Namespace).Create(ctx, er, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = q.takeOver(ctx, pod, er)
	}
	if err != nil {
		return "", false, fmt.Errorf("asking for the eviction of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	q.made[pod.UID] = types.NamespacedName{Namespace: pod.Namespace, Name: name}
	return name, true, nil
}

// takeOver makes the existing request of er's name ask for pod again.
func (q *requests) takeOver(ctx context.Context, pod *corev1.Pod, er *unstructured.Unstructured) error {
	cur, err := q.res(pod.Namespace).Get(ctx, er.GetName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if uid, _, _ := unstructured.NestedString(cur.Object, "spec", "target", "pod", "uid"); uid == string(pod.UID) {
		_, err := q.res(pod.Namespace).Patch(ctx, er.GetName(), types.MergePatchType, []byte(`{"spec":{"intent":"Eviction"}}`), metav1.PatchOptions{})
		return err
	}
	// Its target and requester cannot change: another pod's request goes.
	if err := q.res(pod.Namespace).Delete(ctx, er.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, err = q.res(pod.Namespace).Create(ctx, er, metav1.CreateOptions{})
	return err
}

// withdraw takes back pod's request: at the deadline the drain ends the
// job itself, so the record names who ran the drain, not the evictor.
func (q *requests) withdraw(ctx context.Context, pod *corev1.Pod) error {
	k, ok := q.made[pod.UID]
	if !ok {
		return nil
	}
	_, err := q.res(k.Namespace).Patch(ctx, k.Name, types.MergePatchType, []byte(`{"spec":{"intent":"Withdrawn"}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("withdrawing the eviction request of %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// look is what a pod's Eviction says at one look: its progress when new
// since the last look, "" otherwise, and whether runnerguard has let the
// pod go (its turn completed).
type look struct {
	said string
	let  bool
}

// progress is, for each waited-for pod the drain asked for, what its
// Eviction says (responder.Eviction.Progress).
func (q *requests) progress(ctx context.Context, waiting []drain.Step) (map[types.UID]look, error) {
	byNS := map[string][]drain.Step{}
	for _, s := range waiting {
		if _, ok := q.made[s.Pod.UID]; ok {
			byNS[s.Pod.Namespace] = append(byNS[s.Pod.Namespace], s)
		}
	}
	news := map[types.UID]look{}
	for ns := range byNS {
		// The controller labels each Eviction with its requesters' names.
		list, err := q.dyn.Resource(responder.Evictions).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: drain.Requester})
		if err != nil {
			return nil, fmt.Errorf("reading the Evictions in %s: %w", ns, err)
		}
		for i := range list.Items {
			e, err := responder.FromUnstructured(&list.Items[i])
			if err != nil || e.Spec.Target.Pod == nil {
				continue
			}
			uid := e.Spec.Target.Pod.UID
			l := look{let: e.Turn() == responder.Completed}
			if p := printable.Text(e.Progress()); p != "" && p != q.said[uid] {
				q.said[uid], l.said = p, p
			}
			news[uid] = l
		}
	}
	return news, nil
}

// forget removes the drain's requests: their pods are gone, and a request
// left behind would keep its Eviction.
func (q *requests) forget(ctx context.Context) {
	for _, k := range q.made {
		_ = q.res(k.Namespace).Delete(ctx, k.Name, metav1.DeleteOptions{})
	}
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
		r.requests.asked[s.Pod.UID] = s
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
		r.requests.asked[s.Pod.UID] = s
		if made {
			r.screen.Logf("asked for the eviction of %s/%s (eviction request %s): its responders hold it while its job runs", s.Pod.Namespace, s.Pod.Name, name)
		}
	}
	r.sayGone(tick, evicted)
	news, err := r.requests.progress(ctx, tick.Waiting)
	if err != nil {
		return err
	}
	for _, s := range tick.Waiting {
		l := news[s.Pod.UID]
		if l.said != "" {
			r.screen.Logf("%s/%s: %s", s.Pod.Namespace, s.Pod.Name, l.said)
		}
		// The pod may be gone before the drain judges it free: its
		// eviction is said when runnerguard lets it go.
		if l.let && !evicted[s.Pod.UID] {
			evicted[s.Pod.UID] = true
			r.report.Set(drain.StepPod(s, drain.Evicted, "its responders let it go"))
			r.screen.Logf("evicting pod %s/%s (%s): runnerguard let it go (eviction request %s)", s.Pod.Namespace, s.Pod.Name, s.Runner.Runner.Preset.Name, r.requests.made[s.Pod.UID].Name)
		}
	}
	return nil
}

// checkRequests keeps the drain on eviction requests only where the
// drainer may make them in every namespace of a runner pod in: they are
// the better way, not the only one, and a drainer not granted them evicts
// each runner pod itself.
func (r *drainRun) checkRequests(ctx context.Context, in []string) error {
	if r.requests == nil {
		return nil
	}
	lacking, err := missing(ctx, r.cs, drain.RequestNeeds(in))
	if err != nil {
		return err
	}
	if len(lacking) > 0 {
		r.screen.Logf("runnerguard: you may not %s: the drain evicts each runner pod itself instead", lacking[0])
		r.requests = nil
	}
	return nil
}

// sayGone says the eviction of each pod the drain asked for that left the
// nodes between two looks, before the drain saw it free: its responders
// let it go, and the default evictor evicted it.
func (r *drainRun) sayGone(tick drain.Tick, evicted map[types.UID]bool) {
	here := map[types.UID]bool{}
	for _, s := range slices.Concat(tick.Evict, tick.End, tick.Waiting) {
		here[s.Pod.UID] = true
	}
	var left []drain.Step
	for uid, s := range r.requests.asked {
		if !here[uid] && !evicted[uid] {
			evicted[uid] = true
			left = append(left, s)
		}
	}
	slices.SortFunc(left, func(a, b drain.Step) int {
		return strings.Compare(a.Pod.Namespace+"/"+a.Pod.Name, b.Pod.Namespace+"/"+b.Pod.Name)
	})
	for _, s := range left {
		r.report.Set(drain.StepPod(s, drain.Evicted, "its responders let it go"))
		r.screen.Logf("evicting pod %s/%s (%s): its responders let it go (eviction request %s)", s.Pod.Namespace, s.Pod.Name, s.Runner.Runner.Preset.Name, r.requests.made[s.Pod.UID].Name)
	}
}
