package recorder

import (
	"context"

	"github.com/runnerguard/runnerguard/internal/fleet"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
)

// recordInformer makes informers of every record of k on dyn, each kept
// compact.
func recordInformer(dyn dynamic.Interface, k fleet.RecordKeeper) func() (toolscache.SharedIndexInformer, error) {
	res := dyn.Resource(k.RecordResource()).Namespace(metav1.NamespaceAll)
	compact := compactRecord(k.RecordFields())
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
		return inf, inf.SetTransform(compact)
	}
}

// compactRecord keeps of a record its identity, its deletion and
// finalizers, the status fields that judge it (fields) and the field
// managers' entries that own them (which date their writes, for the
// fleet's zombies: fleet.WrittenAt): an
// EphemeralRunner's spec holds a whole pod template, which the leader need
// not keep.
func compactRecord(fields []string) func(obj any) (any, error) {
	return func(obj any) (any, error) {
		er, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		return compactOf(er, fields)
	}
}

func compactOf(er *unstructured.Unstructured, fields []string) (*unstructured.Unstructured, error) {
	c := &unstructured.Unstructured{Object: map[string]any{}}
	c.SetAPIVersion(er.GetAPIVersion())
	c.SetKind(er.GetKind())
	c.SetNamespace(er.GetNamespace())
	c.SetName(er.GetName())
	c.SetUID(er.GetUID())
	c.SetResourceVersion(er.GetResourceVersion())
	c.SetDeletionTimestamp(er.GetDeletionTimestamp())
	c.SetFinalizers(er.GetFinalizers())
	var owners []metav1.ManagedFieldsEntry
	for _, e := range er.GetManagedFields() {
		if fleet.OwnsStatus(e, fields) {
			owners = append(owners, e)
		}
	}
	c.SetManagedFields(owners)
	for _, f := range fields {
		if v, ok, _ := unstructured.NestedFieldNoCopy(er.Object, "status", f); ok {
			if err := unstructured.SetNestedField(c.Object, runtime.DeepCopyJSONValue(v), "status", f); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}
