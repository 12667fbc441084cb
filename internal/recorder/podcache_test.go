package recorder

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// fakePods is the pods of a fake clientset, which tells the reflector it
// cannot stream lists (WatchList).
type fakePods struct{ *k8sfake.Clientset }

func (f fakePods) Pods(ns string) corev1client.PodInterface { return f.CoreV1().Pods(ns) }

func TestTheCacheNamesTheRecordsOfTheDeathsItsPodsShow(t *testing.T) {
	labelled := func(w *podtest.Wrapper) *corev1.Pod { return w.Label(runnerpod.RunnerLabel, "true").Obj() }
	crashed := labelled(podtest.Runner("ci", "crashed").Restarting("runner", 137, "OOMKilled"))
	ended := labelled(podtest.Runner("ci", "ended").Terminated("runner", 1, "Error"))
	running := labelled(podtest.Runner("ci", "running").Running("runner"))
	unlabelled := podtest.Runner("ci", "unlabelled").Terminated("runner", 1, "Error").Obj()
	other := labelled(podtest.Runner("elsewhere", "ended").Terminated("runner", 1, "Error"))
	cache, err := NewPodCache(fakePods{k8sfake.NewClientset([]runtime.Object{crashed, ended, running, unlabelled, other}...)}, 0)
	require.NoError(t, err)
	ps := configtest.Enforcing().Presets

	_, err = cache.Shown("ci", ps)
	assert.Error(t, err, "not before the cache has synced: a pod it lacks may show a death")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = cache.Start(ctx) }()
	require.True(t, toolscache.WaitForCacheSync(ctx.Done(), cache.HasSynced))
	got, err := cache.Shown("ci", ps)
	require.NoError(t, err)
	want := map[string]bool{}
	for _, pod := range []*corev1.Pod{crashed, ended} {
		runner, ok := presets.Match(pod, ps)
		require.True(t, ok)
		for _, r := range death.Deaths(pod, runner) {
			want[r.Object().Name] = true
		}
	}
	assert.Len(t, want, 2)
	assert.Equal(t, want, got, "the labelled pods' deaths, in their namespace only")
	assert.NotNil(t, cache.Get(types.NamespacedName{Namespace: "ci", Name: "crashed"}))
	assert.Nil(t, cache.Get(types.NamespacedName{Namespace: "ci", Name: "unlabelled"}), "the cache holds labelled runner pods only")
}
