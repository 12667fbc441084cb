package main

import (
	"context"
	"errors"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// whoAmI is the requester's username as the API server sees it (with --as,
// the impersonated user): the name the drain's reason carries.
func whoAmI(ctx context.Context, cs kubernetes.Interface) (string, error) {
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking the API server who you are: %w", err)
	}
	return r.Status.UserInfo.Username, nil
}

// missing is what of needs the API server says the requester may not do.
func missing(ctx context.Context, cs kubernetes.Interface, needs []drain.Permission) ([]drain.Permission, error) {
	var out []drain.Permission
	for _, p := range needs {
		attrs := p.ResourceAttributes
		r, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("asking the API server whether you may %s: %w", p, err)
		}
		if !r.Status.Allowed {
			out = append(out, p)
		}
	}
	return out, nil
}

// nodes are the nodes named and those --selector picks, each once.
func nodes(ctx context.Context, cs kubernetes.Interface, names []string, selector string) ([]*corev1.Node, error) {
	var out []*corev1.Node
	seen := map[string]bool{}
	for _, n := range names {
		node, err := cs.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading node %s: %w", n, err)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, node)
		}
	}
	if selector != "" {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return nil, fmt.Errorf("listing nodes by %q: %w", selector, err)
		}
		for i := range list.Items {
			if n := &list.Items[i]; !seen[n.Name] {
				seen[n.Name] = true
				out = append(out, n)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no node to drain: name one, or give a --selector that matches some")
	}
	return out, nil
}

// runnersOn reads the runner pods on the nodes (of podSelector) and what
// their fleets say of their jobs.
type runnersOn struct {
	cs          kubernetes.Interface
	c           client.Reader
	presets     []runnerpod.Preset
	podSelector string
}

// list is the runner pods on node, each with its job signal and the job
// as its fleet names it.
func (r runnersOn) list(ctx context.Context, node string) ([]drain.Runner, error) {
	pods, err := r.cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(), LabelSelector: r.podSelector})
	if err != nil {
		return nil, fmt.Errorf("listing the pods on node %s: %w", node, err)
	}
	var out []drain.Runner
	for i := range pods.Items {
		pod := &pods.Items[i]
		run, ok := presets.Match(pod, r.presets)
		if !ok {
			continue
		}
		dr := drain.Runner{Pod: pod, Runner: run}
		if presets.KeepsRecord(run) {
			dr.Signal, dr.Job = r.recordJob(ctx, pod, run)
		} else {
			dr.Job = runnerpod.JobFromPod(pod, run.Preset.Job)
		}
		out = append(out, dr)
	}
	return out, nil
}

// recordJob reads the fleet's record of the runner (ARC's
// EphemeralRunner) as the guard does (presets.ReadRecord): one that cannot
// be read, or is not the pod's owner by UID, says the runner is busy; the
// job is named for a busy one.
func (r runnersOn) recordJob(ctx context.Context, pod *corev1.Pod, run runnerpod.Runner) (runnerpod.JobSignal, *v1alpha1.Job) {
	er, _ := presets.ReadRecord(ctx, r.c, run, pod)
	if er.Signal != runnerpod.JobAssigned {
		return er.Signal, nil
	}
	return er.Signal, er.Job
}

// withoutRunners is the clientset kubectl's drain library works with: its
// pod listings leave out the runner pods, which the drain judges by the
// guard's rules rather than kubectl's (a GitLab build pod is unmanaged and
// every injected runner has an emptyDir: kubectl would refuse both, then
// meet the guard's 429 on busy ones). Everything else is the real client.
type withoutRunners struct {
	kubernetes.Interface
	presets []runnerpod.Preset
}

func (w withoutRunners) CoreV1() corev1client.CoreV1Interface {
	return coreWithoutRunners{w.Interface.CoreV1(), w.presets}
}

type coreWithoutRunners struct {
	corev1client.CoreV1Interface
	presets []runnerpod.Preset
}

func (c coreWithoutRunners) Pods(ns string) corev1client.PodInterface {
	return podsWithoutRunners{c.CoreV1Interface.Pods(ns), c.presets}
}

type podsWithoutRunners struct {
	corev1client.PodInterface
	presets []runnerpod.Preset
}

func (p podsWithoutRunners) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	list, err := p.PodInterface.List(ctx, opts)
	if err != nil {
		return list, err
	}
	kept := list.Items[:0]
	for _, pod := range list.Items {
		if _, ok := presets.Match(&pod, p.presets); !ok {
			kept = append(kept, pod)
		}
	}
	list.Items = kept
	return list, nil
}

// allPresets is the default config with every preset on.
func allPresets() config.Config {
	c := config.Default()
	for i := range c.Presets {
		c.Presets[i].Enabled = true
	}
	return c
}
