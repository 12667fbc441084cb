package recorder

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
)

// ephemeralRunnerInformer makes informers of every EphemeralRunner on dyn,
// each kept compact.
func ephemeralRunnerInformer(dyn dynamic.Interface) func() (toolscache.SharedIndexInformer, error) {
	res := dyn.Resource(ephemeralRunnerVersion).Namespace(metav1.NamespaceAll)
	return func() (toolscache.SharedIndexInformer, error) {
		lw := &toolscache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return res.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return res.Watch(ctx, o)
			},
		}
		inf := toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(lw, dyn), &unstructured.Unstructured{}, 0, toolscache.Indexers{})
		return inf, inf.SetTransform(compactEphemeralRunner)
	}
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
	// The job fields the record names (fleet.JobFromEphemeralRunner).
	for _, f := range []string{"jobRequestId", "jobId", "workflowRunId", "jobRepositoryName", "jobWorkflowRef", "jobDisplayName"} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(er.Object, "status", f); ok {
			if err := unstructured.SetNestedField(c.Object, runtime.DeepCopyJSONValue(v), "status", f); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}
