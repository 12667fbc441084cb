package recorder

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestZombieDue(t *testing.T) {
	since := podtest.Start
	named := podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.ZombieAnnotation, runnerpod.Zombie{Kind: "k", Since: since}.Value()).Obj()
	going := named.DeepCopy()
	going.DeletionTimestamp = &metav1.Time{Time: since}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		endAfter time.Duration
		now      time.Time
		due      time.Time
		come     bool
	}{
		{"off: never", named, 0, since.Add(24 * time.Hour), time.Time{}, false},
		{"not yet: due at its since plus the grace", named, time.Hour, since.Add(time.Minute), since.Add(time.Hour), false},
		{"come", named, time.Hour, since.Add(time.Hour), since.Add(time.Hour), true},
		{"no zombie: never", podtest.Runner("ci", "r").Running("runner").Obj(), time.Hour, since.Add(48 * time.Hour), time.Time{}, false},
		{"already going: not again", going, time.Hour, since.Add(48 * time.Hour), time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, come := ZombieDue(tc.pod, tc.endAfter, tc.now)
			assert.Equal(t, tc.due, due)
			assert.Equal(t, tc.come, come)
		})
	}
}

// The leader ends a due zombie as its fleet does, once: ARC's by its
// EphemeralRunner's deletion (ARC re-creates a pod gone alone), any other
// by its pod's eviction; one not due yet is looked at again when due.
func TestZombiesEndAsTheirFleetDoes(t *testing.T) {
	since := podtest.Start
	value := runnerpod.Zombie{Kind: "spent-config", Since: since}.Value()
	cfg := configtest.Enforcing()
	cfg.Guard.EndZombiesAfter = metav1.Duration{Duration: time.Hour}
	er := &unstructured.Unstructured{}
	er.SetGroupVersionKind(arcscaleset.GVK)
	er.SetNamespace("ci")
	er.SetName("arc")
	er.SetUID("er-arc")
	arc := podtest.ARCScaleSet("ci", "arc").Running("runner").Annotate(runnerpod.ZombieAnnotation, value).Obj()
	pool := podtest.Runner("ci", "pool").Running("runner").Annotate(runnerpod.ZombieAnnotation, value).Obj()

	var evicted []string
	c := fake.NewClientBuilder().WithObjects(er, arc.DeepCopy(), pool.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
		SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj client.Object, sr client.Object, o ...client.SubResourceCreateOption) error {
			evicted = append(evicted, sub+" "+obj.GetName())
			return nil
		},
	}).Build()
	zs := &Zombies{Client: c}
	ctx := context.Background()

	res, err := zs.endDue(ctx, arc, cfg, since.Add(time.Minute), ctrl.Result{RequeueAfter: 2 * time.Hour})
	require.NoError(t, err)
	assert.Equal(t, 59*time.Minute, res.RequeueAfter, "looked at again when due, the sooner look kept")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(er), er.DeepCopy()), "not due yet: left alone")

	for range 2 {
		_, err = zs.endDue(ctx, arc, cfg, since.Add(time.Hour), ctrl.Result{})
		require.NoError(t, err)
		_, err = zs.endDue(ctx, pool, cfg, since.Add(time.Hour), ctrl.Result{})
		require.NoError(t, err)
	}
	err = c.Get(ctx, client.ObjectKeyFromObject(er), er.DeepCopy())
	assert.True(t, client.IgnoreNotFound(err) == nil && err != nil, "ARC's zombie is ended by its EphemeralRunner's deletion")
	assert.Equal(t, []string{"eviction pool"}, evicted, "another fleet's by its pod's eviction, once")

	zs.seen(types.NamespacedName{Namespace: "ci", Name: "pool"}, nil)
	_, err = zs.endDue(ctx, pool, cfg, since.Add(time.Hour), ctrl.Result{})
	require.NoError(t, err)
	assert.Len(t, evicted, 2, "a pod of that name seen gone and back is a new one")
}

// A zombie is named once, with one Event, though the cache has not shown
// the name yet when the pod is looked at again.
func TestAZombieIsNamedOnce(t *testing.T) {
	pod := podtest.ARCScaleSet("ci", "arc").Running("runner").Obj()
	var patches int
	c := fake.NewClientBuilder().WithObjects(pod.DeepCopy()).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, o ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, p, o...)
		},
	}).Build()
	rec := events.NewFakeRecorder(10)
	zs := &Zombies{Client: c, Recorder: rec}
	runner, ok := presets.Match(pod, configtest.Enforcing().Presets)
	require.True(t, ok)
	z := runnerpod.Zombie{Kind: arcscaleset.SpentConfig, Since: podtest.Start}
	for range 3 {
		require.NoError(t, zs.name(context.Background(), pod, runner, z))
	}
	assert.Equal(t, 1, patches)
	require.Len(t, rec.Events, 1)
	assert.Contains(t, <-rec.Events, "Warning RunnerZombie a zombie, spent-config since 2026-11-01T12:00:00Z: its EphemeralRunner's job")
	got := &corev1.Pod{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	assert.Equal(t, z.Value(), got.Annotations[runnerpod.ZombieAnnotation])
}
