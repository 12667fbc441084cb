package recorder

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// ephemeralRunnerVersion is the version of ARC's EphemeralRunners the
// cache lists.
var ephemeralRunnerVersion = schema.GroupVersionResource{Group: runnerpod.ARCScaleSetGroup, Version: "v1alpha1", Resource: runnerpod.EphemeralRunnerResource}

// EphemeralRunners is the leader's informer of ARC's EphemeralRunners, each
// kept as what judges its runner's job (runnerpod.EphemeralRunnerJob): a
// job assigned to a scale-set runner changes its EphemeralRunner's status,
// not its pod, so the marker hears of it here.
type EphemeralRunners struct {
	informer toolscache.SharedIndexInformer
}

// NewEphemeralRunners builds the informer on dyn.
func NewEphemeralRunners(dyn dynamic.Interface) (*EphemeralRunners, error) {
	res := dyn.Resource(ephemeralRunnerVersion).Namespace(metav1.NamespaceAll)
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return res.Watch(ctx, o)
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	if err := inf.SetTransform(compactEphemeralRunner); err != nil {
		return nil, err
	}
	return &EphemeralRunners{informer: inf}, nil
}

// EphemeralRunnersServed reports whether the API server serves ARC's
// EphemeralRunners: without ARC's CRD there is nothing to watch.
func EphemeralRunnersServed(mapper meta.RESTMapper) (bool, error) {
	_, err := mapper.RESTMapping(schema.GroupKind{Group: runnerpod.ARCScaleSetGroup, Kind: runnerpod.EphemeralRunnerKind}, ephemeralRunnerVersion.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// compactEphemeralRunner keeps of an EphemeralRunner its identity, its
// deletion and finalizers, and its job fields: its spec holds a whole pod
// template, which the leader need not keep.
func compactEphemeralRunner(obj any) (any, error) {
	er, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	c := &unstructured.Unstructured{Object: map[string]any{}}
	c.SetAPIVersion(er.GetAPIVersion())
	c.SetKind(er.GetKind())
	c.SetNamespace(er.GetNamespace())
	c.SetName(er.GetName())
	c.SetUID(er.GetUID())
	c.SetResourceVersion(er.GetResourceVersion())
	c.SetDeletionTimestamp(er.GetDeletionTimestamp())
	c.SetFinalizers(er.GetFinalizers())
	for _, f := range []string{"jobRequestId", "jobId"} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(er.Object, "status", f); ok {
			if err := unstructured.SetNestedField(c.Object, runtime.DeepCopyJSONValue(v), "status", f); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

// Start runs the informer until ctx ends (a manager.Runnable).
func (e *EphemeralRunners) Start(ctx context.Context) error {
	e.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection: only the leader marks.
func (e *EphemeralRunners) NeedLeaderElection() bool { return true }

// Get is the EphemeralRunner named key, or nil.
func (e *EphemeralRunners) Get(key types.NamespacedName) *unstructured.Unstructured {
	obj, ok, err := e.informer.GetIndexer().GetByKey(key.String())
	if err != nil || !ok {
		return nil
	}
	return obj.(*unstructured.Unstructured)
}

// source is the informer's events, each as a request for the runner pod of
// the EphemeralRunner's name (ARC names the pod after it; the marker checks
// the pod's owner reference by UID).
func (e *EphemeralRunners) source() source.Source {
	h := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
	})
	return syncingInformer{Informer: &source.Informer{Informer: e.informer, Handler: h}, synced: e.informer.HasSynced}
}
