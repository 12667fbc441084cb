package recorder

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// The follower of ARC's CRD starts reading EphemeralRunners when the API
// server begins serving them and stops when it stops, with no restart, and
// says which it is doing in its gauge.
func TestRecordsFollowTheFleetsCRD(t *testing.T) {
	er := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner",
		"metadata": map[string]any{"namespace": "ns", "name": "r", "uid": "er-1"},
		"status":   map[string]any{"jobRequestId": int64(7)},
	}}
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{arcscaleset.GVR: "EphemeralRunnerList"}, er)
	var served atomic.Bool
	e := newFollower(arcscaleset.Fleet{}, func(context.Context) (bool, error) { return served.Load(), nil }, recordInformer(dyn, arcscaleset.Fleet{}), time.Hour)
	e.jobs = NewLastJobs(LastJobsKept)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key := types.NamespacedName{Namespace: "ns", Name: "r"}

	e.check(ctx, logr.Discard())
	assert.False(t, e.Watching(), "no CRD: nothing watched")
	assert.Nil(t, e.Get(key), "no CRD: every ARC runner is taken as busy")
	assert.Equal(t, 0.0, testutil.ToFloat64(recordsWatched.WithLabelValues(arcscaleset.Kind)), "the degraded mode is visible")

	served.Store(true)
	e.check(ctx, logr.Discard())
	require.True(t, e.Watching(), "the CRD came: watched without a restart")
	assert.Equal(t, 1.0, testutil.ToFloat64(recordsWatched.WithLabelValues(arcscaleset.Kind)))
	require.Eventually(t, func() bool { return e.Get(key) != nil }, time.Minute, 10*time.Millisecond)
	select {
	case ev := <-e.events:
		assert.Equal(t, "r", ev.Object.GetName(), "the marker hears of each EphemeralRunner")
	case <-time.After(time.Minute):
		t.Fatal("no event for the marker")
	}
	if job := e.jobs.Job("er-1"); assert.NotNil(t, job, "its job kept for its record") {
		assert.Equal(t, "7", job.RequestID)
	}
	later := time.Now().Add(2 * clockSkew)
	require.Eventually(t, func() bool { return e.jobs.Unseen("er-other", later) }, time.Minute, 10*time.Millisecond,
		"synced, the watch tells an owner it never saw")
	assert.False(t, e.jobs.Unseen("er-1", later), "from one it holds")
	require.NoError(t, dyn.Resource(arcscaleset.GVR).Namespace("ns").Delete(ctx, "r", metav1.DeleteOptions{}))
	require.Eventually(t, func() bool { return e.Get(key) == nil }, time.Minute, 10*time.Millisecond)
	assert.NotNil(t, e.jobs.Job("er-1"), "deleted, its job is still kept for its record")
	assert.False(t, e.jobs.Unseen("er-1", later), "and it is still one the watch saw")
	_, err := dyn.Resource(arcscaleset.GVR).Namespace("ns").Create(ctx, er, metav1.CreateOptions{})
	require.NoError(t, err)

	served.Store(false)
	e.check(ctx, logr.Discard())
	assert.False(t, e.Watching(), "the CRD went: the watch stopped")
	assert.False(t, e.jobs.Unseen("er-other", later), "unwatched, nothing is said unseen")
	assert.Nil(t, e.Get(key), "what it held is dropped")
	assert.Equal(t, 0.0, testutil.ToFloat64(recordsWatched.WithLabelValues(arcscaleset.Kind)))

	served.Store(true)
	e.check(ctx, logr.Discard())
	require.True(t, e.Watching(), "and came back")
	require.Eventually(t, func() bool { return e.Get(key) != nil }, time.Minute, 10*time.Millisecond)
	e.stopInformer()
}

// The marker's workers wait for the first check and, when the
// EphemeralRunners are served, for their informer to sync, so no idle
// runner is marked busy for want of a read.
func TestTheMarkersSourceWaitsForTheFirstCheck(t *testing.T) {
	e := newFollower(arcscaleset.Fleet{}, func(context.Context) (bool, error) { return false, nil }, nil, time.Hour)
	src := e.source().(followingSource)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.Error(t, src.WaitForSync(ctx), "not before the first check")
	e.check(context.Background(), logr.Discard())
	e.checkOnce.Do(func() { close(e.checked) })
	assert.NoError(t, src.WaitForSync(context.Background()))
}
