package recorder

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/fleet/tekton"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

func taskRun(name string, uid types.UID, status string) *unstructured.Unstructured {
	tr := &unstructured.Unstructured{Object: map[string]any{}}
	tr.SetAPIVersion("tekton.dev/v1")
	tr.SetKind("TaskRun")
	tr.SetNamespace("ci")
	tr.SetName(name)
	tr.SetUID(uid)
	if status != "" {
		_ = unstructured.SetNestedSlice(tr.Object, []any{map[string]any{"type": "Succeeded", "status": status, "reason": "TaskRunCancelled"}}, "status", "conditions")
	}
	// Tekton names the TaskRun's pod (podtest.Tekton's name for it).
	_ = unstructured.SetNestedField(tr.Object, name+"-pod", "status", "podName")
	return tr
}

// Each recorded death of a Tekton pod waits for its TaskRun's account: kept
// once final, given up when the TaskRun is gone or another, or when it
// never comes within viewPatience.
func TestViewsKeepTheFleetsAccountOnceFinal(t *testing.T) {
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: "tekton.dev", Version: "v1", Kind: "TaskRun"}, &unstructured.Unstructured{})
	records := []client.Object{}
	for _, n := range []string{"final", "running", "gone", "other", "late", "impostor"} {
		records = append(records, &v1alpha1.RunnerDeath{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: n}})
	}
	// An editor's pod naming the TaskRun "final" as its owner: the TaskRun
	// names another pod.
	impostor := podtest.Tekton("ci", "final").Obj()
	impostor.Name, impostor.OwnerReferences[0].UID = "impostor", "u-final"
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1alpha1.RunnerDeath{}).WithObjects(records...).
		WithObjects(taskRun("final", "u-final", "False"), taskRun("running", "u-running", "Unknown"), taskRun("other", "u-new", "True"), taskRun("late", "u-late", "Unknown")).Build()
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	v := NewViews(c, c)
	v.Now = func() time.Time { return now }
	ctx := context.Background()
	for _, n := range []string{"final", "running", "gone", "other", "late"} {
		pod := podtest.Tekton("ci", n).Obj()
		pod.OwnerReferences[0].UID = types.UID("u-" + n)
		v.follow(ctx, pod, string(tekton.Name), types.NamespacedName{Namespace: "ci", Name: n})
	}
	v.follow(ctx, impostor, string(tekton.Name), types.NamespacedName{Namespace: "ci", Name: "impostor"})
	var waiting []viewWait
	for range 6 {
		waiting = append(waiting, <-v.queue)
	}
	waiting = v.look(ctx, waiting)
	names := func(ws []viewWait) (out []string) {
		for _, w := range ws {
			out = append(out, w.record.Name)
		}
		return out
	}
	assert.ElementsMatch(t, []string{"running", "late", "impostor"}, names(waiting), "kept: final; given up: gone, and another TaskRun of the name")
	got := &v1alpha1.RunnerDeath{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ci", Name: "final"}, got))
	require.NotNil(t, got.Status.FleetView)
	assert.Equal(t, "TaskRunCancelled", got.Status.FleetView.Reason)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ci", Name: "other"}, got))
	assert.Nil(t, got.Status.FleetView, "a TaskRun made again under the name is another's")

	tr := taskRun("running", "u-running", "True")
	require.NoError(t, c.Update(ctx, withVersion(t, c, tr)))
	now = now.Add(viewPatience + time.Second)
	waiting = v.look(ctx, waiting)
	assert.Empty(t, waiting, "kept once final; the late one given up")
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ci", Name: "running"}, got))
	assert.Equal(t, "True", got.Status.FleetView.Status)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ci", Name: "late"}, got))
	assert.Nil(t, got.Status.FleetView)
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "ci", Name: "impostor"}, got))
	assert.Nil(t, got.Status.FleetView, "a TaskRun's account is only its own pod's")
}

func withVersion(t *testing.T, c client.Client, o *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(o.GroupVersionKind())
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(o), live))
	o.SetResourceVersion(live.GetResourceVersion())
	return o
}

// A pod of a fleet that keeps no account of its own, or whose owner is of
// another kind, is not waited for.
func TestViewsFollowOnlyAFleetsOwnAccount(t *testing.T) {
	v := NewViews(nil, nil)
	v.follow(context.Background(), podtest.Runner("ci", "r").Obj(), "arc-scale-set", types.NamespacedName{Namespace: "ci", Name: "r"})
	pod := podtest.Tekton("ci", "t").Obj()
	pod.OwnerReferences[0].Kind = "PipelineRun"
	v.follow(context.Background(), pod, string(tekton.Name), types.NamespacedName{Namespace: "ci", Name: "t"})
	assert.Empty(t, v.queue)
	var none *Views
	none.follow(context.Background(), podtest.Tekton("ci", "t").Obj(), string(tekton.Name), types.NamespacedName{})
}
