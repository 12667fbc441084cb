package recorder

import (
	"context"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// PodCache is the watcher's informer of runner pods (those runnerpod.Labelled
// selects), each kept as a cachedPod. It runs on the leader only: the
// followers keep no pods but the guard's metadata.
//
// It is an informer of its own, not the manager's cache, because the
// manager's cache keeps corev1.Pods, and most of a Pod, even stripped, is
// the empty structs of fields the recorder never reads: the leader's memory
// grows with the fleet, so each cached pod keeps only what a record needs.
// BenchmarkCacheMemory measures both; docs/performance has the figures.
type PodCache struct {
	informer toolscache.SharedIndexInformer
}

// NewPodCache builds the cache on pods, a client of the core API group's
// pods (its own typed client: the whole clientset would add every API
// group's code to the binary, most of it resident); resync replays every
// pod to the watcher that often.
func NewPodCache(pods corev1client.PodsGetter, resync time.Duration) (*PodCache, error) {
	selector := runnerpod.Labelled().String()
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return pods.Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return pods.Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	// The API server streams the initial list (WatchList) to a client that
	// can take it, as client-go's own informers ask.
	inf := toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(lw, pods), &corev1.Pod{}, resync,
		toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(compact); err != nil {
		return nil, err
	}
	return &PodCache{informer: inf}, nil
}

// KeepJobKeys makes the cache keep these pod labels and annotations too:
// those the presets read a job from (runnerpod.JobPodKeys). Before Start.
func (c *PodCache) KeepJobKeys(labels, annotations []string) error {
	return c.informer.SetTransform(compactor{labels: labels, annotations: annotations}.compact)
}

// Start runs the informer until ctx ends (a manager.Runnable).
func (c *PodCache) Start(ctx context.Context) error {
	c.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection: only the leader records deaths.
func (c *PodCache) NeedLeaderElection() bool { return true }

// Get returns the runner pod named key as the watcher reads it, or nil.
func (c *PodCache) Get(key types.NamespacedName) *corev1.Pod {
	obj, ok, err := c.informer.GetIndexer().GetByKey(key.String())
	if err != nil || !ok {
		return nil
	}
	return obj.(*cachedPod).pod()
}

// Keys names the cached runner pods of namespace ("": of all).
func (c *PodCache) Keys(namespace string) []types.NamespacedName {
	var objs []any
	if namespace == "" {
		objs = c.informer.GetIndexer().List()
	} else {
		objs, _ = c.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
	}
	keys := make([]types.NamespacedName, 0, len(objs))
	for _, o := range objs {
		p := o.(*cachedPod)
		keys = append(keys, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
	}
	return keys
}

// Held names the cached runner pods of namespace its budget holds
// (labelled held), read without copying a pod.
func (c *PodCache) Held(namespace string) []types.NamespacedName {
	objs, _ := c.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
	var keys []types.NamespacedName
	for _, o := range objs {
		if p := o.(*cachedPod); p.Labels[runnerpod.BudgetLabel] == BudgetHeld {
			keys = append(keys, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	return keys
}

// OnNode is the keys of the cached pods bound to node.
func (c *PodCache) OnNode(node string) []types.NamespacedName {
	var keys []types.NamespacedName
	for _, o := range c.informer.GetIndexer().List() {
		if p := o.(*cachedPod); p.node == node {
			keys = append(keys, types.NamespacedName{Namespace: p.Namespace, Name: p.Name})
		}
	}
	return keys
}

// HasSynced reports whether the cache holds every runner pod listed at its
// start.
func (c *PodCache) HasSynced() bool { return c.informer.HasSynced() }

// Shown names the records of the deaths the statuses of namespace's runner
// pods still show: those a watcher would write again. An error until the
// cache has synced, when a pod missing from it may still exist.
func (c *PodCache) Shown(namespace string, ps []runnerpod.Preset) (map[string]bool, error) {
	if !c.informer.HasSynced() {
		return nil, errors.New("the runner pod cache has not synced")
	}
	objs, err := c.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, o := range objs {
		pod := o.(*cachedPod).pod()
		runner, ok := presets.Match(pod, ps)
		if !ok {
			continue
		}
		for _, r := range death.Deaths(pod, runner) {
			names[r.Name()] = true
		}
	}
	return names, nil
}

// source is the cache's pod events as a controller's source; the
// controller starts its workers once the cache has synced.
func (c *PodCache) source(h handler.EventHandler, p ...predicate.Predicate) source.Source {
	return syncingInformer{Informer: &source.Informer{Informer: c.informer, Handler: h, Predicates: p}, synced: c.HasSynced}
}

type syncingInformer struct {
	*source.Informer
	synced toolscache.InformerSynced
}

func (s syncingInformer) WaitForSync(ctx context.Context) error {
	if !toolscache.WaitForCacheSync(ctx.Done(), s.synced) {
		return errors.New("the runner pod cache did not sync")
	}
	return nil
}

// pod is the pod as the watcher reads it. It shares the cache's memory:
// readers must not change it.
func (c *cachedPod) pod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: c.ObjectMeta, Status: corev1.PodStatus{Phase: c.phase, Reason: c.reason, Message: c.message,
		Conditions: c.conditions, ContainerStatuses: c.statuses, InitContainerStatuses: c.initStatuses}}
	p.Spec.NodeName, p.Spec.TerminationGracePeriodSeconds = c.node, c.grace
	p.Spec.ActiveDeadlineSeconds, p.Status.StartTime = c.deadline, c.start
	for _, n := range c.containers {
		ct := corev1.Container{Name: n}
		if slices.Contains(c.probed, n) {
			ct.LivenessProbe = &corev1.Probe{} // its presence is what a record reads
		}
		p.Spec.Containers = append(p.Spec.Containers, ct)
	}
	for _, n := range c.sidecars {
		p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: n, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
	}
	return p
}
