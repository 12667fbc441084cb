//go:build e2e

package api

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// caughtUp returns once the leading watcher has done all the work that the
// pod writes made so far can bring, so that a check of "recorded once" or
// "notified once" that follows fails on a late duplicate rather than
// passing before it. A runner in a namespace of its own dies after those
// writes: its record proves that the watcher's one, cluster-wide watch of
// runner pods, which delivers in the API server's order, has delivered
// them and queued their pods. Then the watcher's queue is seen empty with
// no reconcile running, twice, with no reconcile finished in between:
// every pod queued before has been reconciled since. A pod the watcher
// put back for later (a death waiting for the vitals or for its deleter's
// note) is not waited for: callers wait for the record they check first.
func caughtUp(t *testing.T) {
	t.Helper()
	ns := markerNamespace(t)
	name := "marker-" + rand.String(6)
	pod := create(t, nil, markerRunner(ns, name))
	writeStatus(t, pod, podtest.Runner(ns, name).Terminated("runner", 1, "Error").Obj().Status)
	require.Eventually(t, func() bool { return len(deathsOf(t, pod)) == 1 }, patience, 100*time.Millisecond,
		"the marker runner's death is recorded")
	var last *watcherWork
	require.Eventually(t, func() bool {
		now := watcherQueue(t)
		idle := last != nil && now.idle() && last.idle() && now.reconciled == last.reconciled
		last = &now
		return idle
	}, patience, 100*time.Millisecond, "the watcher's queue is done with every pod queued before the marker")
}

// markerRunner is a busy runner labelled as the injector labels one: the
// watcher sees only labelled pods, and the injector the webhook
// registration calls may be the replica a test stopped.
func markerRunner(ns, name string) *corev1.Pod {
	pod := busyRunner(ns, name)
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[runnerpod.RunnerLabel] = "true"
	return pod
}

var (
	markerOnce sync.Once
	markerNS   string
)

// markerNamespace is the opted-in namespace caughtUp's runners die in,
// made once: a new namespace may reach the watcher's namespace informer
// after its first pod, which would then never be recorded; and markers
// apart from a test's namespace leave its retention alone.
func markerNamespace(t *testing.T) string {
	t.Helper()
	markerOnce.Do(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:   "e2e-markers",
			Labels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"},
		}}
		require.NoError(t, admin.Create(context.Background(), ns))
		// Until the watcher's namespace informer holds it, the watcher
		// skips its pods: a first runner is written until it is recorded.
		pod := create(t, nil, markerRunner(ns.Name, "first"))
		writeStatus(t, pod, podtest.Runner(ns.Name, "first").Terminated("runner", 1, "Error").Obj().Status)
		require.Eventually(t, func() bool {
			if len(deathsOf(t, pod)) == 1 {
				return true
			}
			touch(t, pod)
			return false
		}, patience, 500*time.Millisecond, "the marker namespace's first runner is recorded")
		markerNS = ns.Name
	})
	require.NotEmpty(t, markerNS, "the marker namespace")
	return markerNS
}

// watcherWork is the state of the watcher's work queue, summed over the
// replicas (only the leader's watcher runs).
type watcherWork struct {
	seen       bool // some replica runs the watcher
	queued     float64
	running    float64
	reconciled float64
}

func (w watcherWork) idle() bool { return w.seen && w.queued == 0 && w.running == 0 }

// watcherController is the watcher's controller and work queue name.
const watcherController = "runner-deaths"

// watcherQueue reads the watcher's queue from the replicas' metrics:
// controller-runtime's work queue depth, active workers and reconciles.
// A replica that is stopped does no work.
func watcherQueue(t *testing.T) watcherWork {
	t.Helper()
	var w watcherWork
	for _, s := range []*apitest.Server{server, replica} {
		m, err := s.Scrape()
		if errors.Is(err, syscall.ECONNREFUSED) {
			continue
		}
		require.NoError(t, err)
		depth, ok := m.Sum("workqueue_depth", map[string]string{"name": watcherController})
		active, _ := m.Sum("controller_runtime_active_workers", map[string]string{"controller": watcherController})
		done, _ := m.Sum("controller_runtime_reconcile_total", map[string]string{"controller": watcherController})
		w.seen = w.seen || ok
		w.queued, w.running, w.reconciled = w.queued+depth, w.running+active, w.reconciled+done
	}
	return w
}

// touch writes pod's metadata (an annotation of no meaning), which the
// watcher sees as an update of the pod.
func touch(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"e2e.runnerguard.io/touched":"`+rand.String(6)+`"}}}`))
	require.NoError(t, admin.Patch(context.Background(), pod.DeepCopy(), patch))
}
