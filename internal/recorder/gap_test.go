package recorder

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// gapAt is a gap whose clock the test moves, holding runner pods (a
// container named "runner") for a minute, at most max of them.
func gapAt(max int) (*Gap, *time.Time) {
	now := podtest.Start
	g := NewGap(nil, time.Minute, max, func() time.Time { return now })
	g.configure(compactor{}, []string{"runner"})
	return g, &now
}

func heldUIDs(g *Gap) []types.UID {
	var out []types.UID
	for _, h := range g.held {
		out = append(out, h.pod.UID)
	}
	return out
}

func TestTheGapHoldsRemovedRunnerPodsOnly(t *testing.T) {
	g, _ := gapAt(10)
	g.removed(podtest.Runner("ci", "a").Terminated("runner", 1, "Error").Obj())
	g.removed(podtest.Plain("ci", "app").Obj())
	assert.Equal(t, []types.UID{"uid-a"}, heldUIDs(g), "a pod without a runner container is no runner's death")

	kept := g.held[0].pod.pod()
	assert.Empty(t, kept.Spec.Containers[0].Image, "held as the leader's cache keeps a pod: compacted")
	require.Len(t, kept.Status.ContainerStatuses, 1)
	assert.Equal(t, int32(1), kept.Status.ContainerStatuses[0].State.Terminated.ExitCode, "its final state")
}

func TestTheGapIsBoundedAndForgetsTheOldestFirst(t *testing.T) {
	g, now := gapAt(3)
	dropped := testutil.ToFloat64(gapDropped)
	for i := range 5 {
		*now = now.Add(time.Second)
		g.removed(podtest.Runner("ci", fmt.Sprint("p", i)).Running("runner").Obj())
	}
	assert.Equal(t, []types.UID{"uid-p2", "uid-p3", "uid-p4"}, heldUIDs(g))
	assert.Equal(t, 2.0, testutil.ToFloat64(gapDropped)-dropped, "each removal forgot at the cap is counted")
}

func TestTheGapForgetsRemovalsPastItsHold(t *testing.T) {
	g, now := gapAt(10)
	g.removed(podtest.Runner("ci", "old").Running("runner").Obj())
	*now = now.Add(30 * time.Second)
	g.removed(podtest.Runner("ci", "mid").Running("runner").Obj())
	*now = now.Add(31 * time.Second) // old: 61 s ago; mid: 31 s
	g.removed(podtest.Runner("ci", "new").Running("runner").Obj())
	assert.Equal(t, []types.UID{"uid-mid", "uid-new"}, heldUIDs(g))

	*now = now.Add(45 * time.Second) // mid: 76 s ago; new: 45 s
	var got []types.UID
	g.handTo(func(p *corev1.Pod, _ time.Time) { got = append(got, p.UID) }, func() bool { return false })
	assert.Equal(t, []types.UID{"uid-new"}, got, "what expired before the replica led is not handed on")
}

func TestTheGapHandsTheLeaderWhatItHeldThenEachRemovalUntilTheLeadersCacheSeesThem(t *testing.T) {
	g, now := gapAt(10)
	g.removed(podtest.Runner("ci", "before").Running("runner").Obj())
	removedAt := *now

	type handed struct {
		uid types.UID
		at  time.Time
	}
	var got []handed
	synced := false
	*now = now.Add(50 * time.Second)
	g.handTo(func(p *corev1.Pod, at time.Time) { got = append(got, handed{p.UID, at}) }, func() bool { return synced })
	assert.Equal(t, []handed{{"uid-before", removedAt}}, got, "held, with when it was seen removed")
	assert.Empty(t, g.held, "handed on, not held")

	*now = now.Add(time.Hour)
	g.removed(podtest.Runner("ci", "while-syncing").Running("runner").Obj())
	assert.Equal(t, handed{"uid-while-syncing", *now}, got[len(got)-1], "nothing expires once the replica leads")

	synced = true
	g.removed(podtest.Runner("ci", "synced").Running("runner").Obj())
	*now = now.Add(59 * time.Second)
	g.removed(podtest.Runner("ci", "within-hold").Running("runner").Obj())
	*now = now.Add(2 * time.Second)
	g.removed(podtest.Runner("ci", "after").Running("runner").Obj())
	var uids []types.UID
	for _, h := range got {
		uids = append(uids, h.uid)
	}
	assert.Equal(t, []types.UID{"uid-before", "uid-while-syncing", "uid-synced", "uid-within-hold"}, uids,
		"handed on for a hold after the leader's cache synced, then left to it")
	assert.Empty(t, g.held, "and never held again")
}

func TestTheGapNamesTheRunnerPodsRemovedWithinTwoHoldsEvenOnceItLeads(t *testing.T) {
	g, now := gapAt(2)
	g.removed(podtest.Runner("ci", "old").Running("runner").Obj())
	*now = now.Add(90 * time.Second)
	g.removed(podtest.Runner("ci", "a").Running("runner").Obj())
	g.handTo(func(*corev1.Pod, time.Time) {}, func() bool { return true })
	*now = now.Add(31 * time.Second) // past the gap's hold, within two
	g.removed(podtest.Runner("ci", "b").Running("runner").Obj())
	g.removed(podtest.Plain("ci", "app").Obj())
	assert.Equal(t, map[types.UID]bool{"uid-a": true, "uid-b": true}, g.Recent(),
		"the old one is past two holds; a pod without a runner has no record to spare")

	for _, name := range []string{"c", "d", "e"} {
		g.removed(podtest.Runner("ci", name).Running("runner").Obj())
	}
	assert.Len(t, g.Recent(), 4, "at most twice as many as the gap holds")
	*now = now.Add(121 * time.Second)
	assert.Empty(t, g.Recent())
}

// BenchmarkGapMemory reports what a follower's gap holds at its bound: the
// final states of max removals within its hold, the fleet's runner pods as
// the API server returns them.
func BenchmarkGapMemory(b *testing.B) {
	const max = 2000
	var total uint64
	for range b.N {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		g, _ := gapAt(max)
		for i := range max {
			g.removed(fullRunnerPod(i))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if len(g.held) != max {
			b.Fatalf("held %d, want %d", len(g.held), max)
		}
		runtime.KeepAlive(g)
		total += after.HeapAlloc - before.HeapAlloc
	}
	b.ReportMetric(float64(total)/float64(b.N)/(1<<20), "MiB/2000removals")
	b.ReportMetric(float64(total)/float64(b.N)/max, "B/removal")
}

// A replica is ready once its gap watches runner pod removals, not before:
// while the list its watch begins from fails it holds nothing of a
// removal, and once the watch runs a removal is held. The fake clientset
// lists without a resource version, which a watch cannot resume from; the
// list here answers with one, as the API server does.
func TestAReplicaIsReadyOnlyOnceItsGapWatchesRemovals(t *testing.T) {
	pod := podtest.Runner("ci", "removed").Label(runnerpod.RunnerLabel, "true").Terminated("runner", 1, "Error").Obj()
	pod.ResourceVersion = "2"
	cs := k8sfake.NewClientset(pod)
	listed, listing := make(chan struct{}, 1), make(chan struct{})
	cs.PrependReactor("list", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		select {
		case listed <- struct{}{}:
		default:
		}
		select {
		case <-listing:
			return true, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "2"}}, nil
		default:
			return true, nil, apierrors.NewServiceUnavailable("the API server is starting")
		}
	})
	watching := make(chan struct{})
	var once sync.Once
	cs.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		once.Do(func() { close(watching) })
		return false, nil, nil // the fake's own watch serves it
	})
	g := NewGap(cs.CoreV1(), time.Minute, 10, time.Now)
	g.configure(compactor{}, []string{"runner"})
	require.Error(t, g.Watched(nil), "not ready before it starts")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	<-listed
	assert.Error(t, g.Watched(nil), "not ready while the list its watch would begin from fails")

	close(listing)
	require.Eventually(t, func() bool { return g.Watched(nil) == nil }, time.Minute, 10*time.Millisecond, "ready once the list answers and the watch begins")
	<-watching
	require.NoError(t, cs.CoreV1().Pods("ci").Delete(ctx, pod.Name, metav1.DeleteOptions{}))
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return slices.Equal([]types.UID{pod.UID}, heldUIDs(g))
	}, time.Minute, 10*time.Millisecond, "the removal the watch saw is held")
}
