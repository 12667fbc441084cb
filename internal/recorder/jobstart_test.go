package recorder

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestAnEphemeralRunnerTurnsBusyOnlyWhenItsJobIsAssigned(t *testing.T) {
	er := func(status map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "r", "uid": "er-1"}, "status": status}}
	}
	idle, busy := er(map[string]any{"phase": "Running"}), er(map[string]any{"jobRequestId": int64(7)})
	assert.True(t, turnedBusy(arcscaleset.Fleet{}, idle, busy), "no job, then one")
	assert.False(t, turnedBusy(arcscaleset.Fleet{}, busy, busy), "a later update of a busy runner is not its job's start")
	assert.False(t, turnedBusy(arcscaleset.Fleet{}, idle, idle))
	assert.False(t, turnedBusy(arcscaleset.Fleet{}, busy, idle))
}

// The leader writes when it saw the job begin on the runner's own pod only
// (its owner by UID), once.
func TestTheJobStartIsWrittenOnceOnTheRunnersOwnPod(t *testing.T) {
	w := podtest.ARCScaleSet("ci", "r").Running("runner")
	w.OwnerReferences[0].UID = "er-1"
	pod := w.Obj()
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithObjects(pod).Build()
	j := JobStamper{Reader: c, Writer: c}
	ctx := context.Background()
	key := types.NamespacedName{Namespace: "ci", Name: "r"}
	at := time.Date(2026, 11, 1, 12, 3, 0, 0, time.UTC)

	require.NoError(t, j.stamp(ctx, jobStart{pod: key, uid: "other-er", at: at}))
	got := &corev1.Pod{}
	require.NoError(t, c.Get(ctx, key, got))
	assert.NotContains(t, got.Annotations, runnerpod.JobAssignedAt, "another EphemeralRunner's job is not this pod's")

	require.NoError(t, j.stamp(ctx, jobStart{pod: key, uid: "er-1", at: at}))
	require.NoError(t, c.Get(ctx, key, got))
	assert.Equal(t, "2026-11-01T12:03:00Z", got.Annotations[runnerpod.JobAssignedAt])

	require.NoError(t, j.stamp(ctx, jobStart{pod: key, uid: "er-1", at: at.Add(time.Hour)}))
	require.NoError(t, c.Get(ctx, key, got))
	assert.Equal(t, "2026-11-01T12:03:00Z", got.Annotations[runnerpod.JobAssignedAt], "written once")

	require.NoError(t, j.stamp(ctx, jobStart{pod: types.NamespacedName{Namespace: "ci", Name: "gone"}, uid: "er-2", at: at}), "a pod already gone needs none")
}
