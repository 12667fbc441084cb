package watch

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/death"
	"github.com/runnerguard/runnerguard/webhook/podtest"
	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

func newWatcher(t *testing.T, objs ...client.Object) *Watcher {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci", Labels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"}}}
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}
	c := fake.NewClientBuilder().WithObjects(append(objs, ns, other)...).Build()
	return &Watcher{
		Client: c, Config: config.Default(), Deaths: death.NewRecorder(c, c, "test"),
		Namespaces: labels.SelectorFromSet(labels.Set{runnerpod.EnabledNamespaceLabel: "true"}),
		StuckAfter: 10 * time.Minute, Now: func() time.Time { return podtest.Start.Add(time.Hour) },
		stuck: map[types.NamespacedName]string{},
	}
}

func reconcile(t *testing.T, w *Watcher, pod *corev1.Pod) ctrl.Result {
	t.Helper()
	res, err := w.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)})
	require.NoError(t, err)
	return res
}

func update(t *testing.T, w *Watcher, pod *corev1.Pod) {
	t.Helper()
	require.NoError(t, w.Client.Status().Update(context.Background(), pod))
}

func events(t *testing.T, w *Watcher, reason string) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	require.NoError(t, w.Client.List(context.Background(), list))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func TestADeathIsRecordedOnceAcrossResyncs(t *testing.T) {
	pod := podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").Obj()
	w := newWatcher(t, pod)
	for range 3 {
		reconcile(t, w, pod)
	}
	evs := events(t, w, death.ReasonDied)
	require.Len(t, evs, 1)
	assert.Equal(t, corev1.EventTypeNormal, evs[0].Type, "a clean exit is Normal")
	assert.Equal(t, `runner "runner" died: clean-exit; exit 0, reason Completed`, evs[0].Note)

	restarted := newWatcher(t, pod)
	restarted.Client, restarted.Deaths = w.Client, death.NewRecorder(w.Client, w.Client, "other-replica")
	reconcile(t, restarted, pod)
	assert.Len(t, events(t, w, death.ReasonDied), 1, "another replica, or a restart, finds the death on record")
}

func TestARestartInPlaceIsANewDeath(t *testing.T) {
	pod := podtest.Runner("ci", "r").Restarting("runner", 1, "Error").Obj()
	w := newWatcher(t, pod)
	reconcile(t, w, pod)
	require.Len(t, events(t, w, death.ReasonDied), 1)
	// It runs again and dies again, with a new container ID.
	cs := &pod.Status.ContainerStatuses[0]
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", ContainerID: "containerd://runner-2",
		StartedAt: metav1.NewTime(podtest.Start.Add(20 * time.Minute)), FinishedAt: metav1.NewTime(podtest.Start.Add(30 * time.Minute))}}
	cs.ContainerID, cs.RestartCount = "containerd://runner-3", 2
	update(t, w, pod)
	reconcile(t, w, pod)
	evs := events(t, w, death.ReasonDied)
	require.Len(t, evs, 2)
	var classes []death.Class
	for _, e := range evs {
		r, err := death.Parse(e.Annotations[death.RecordAnnotation])
		require.NoError(t, err)
		classes = append(classes, r.Class)
	}
	assert.ElementsMatch(t, []death.Class{death.ErrorExit, death.CgroupOOM}, classes)
}

func TestTwoRunnerContainersDieSeparately(t *testing.T) {
	w := podtest.Runner("ci", "r2")
	w.Spec.Containers = append(w.Spec.Containers, corev1.Container{Name: "runner-2", Image: "x"})
	pod := w.Terminated("runner", 0, "Completed").Terminated("runner-2", 2, "Error").Obj()
	wt := newWatcher(t, pod)
	wt.Config.Presets[4].RunnerContainers = []string{"runner", "runner-2"}
	reconcile(t, wt, pod)
	assert.Len(t, events(t, wt, death.ReasonDied), 2)
}

func terminating(w *podtest.Wrapper, deletedAt time.Time) *corev1.Pod {
	pod := w.Obj()
	// The deletion began at deletedAt; its grace period ends 30s later.
	pod.DeletionTimestamp, pod.DeletionGracePeriodSeconds = &metav1.Time{Time: deletedAt.Add(30 * time.Second)}, ptr.To(int64(30))
	pod.Finalizers = []string{"test/keep"} // the fake client keeps a terminating object only with a finalizer
	return pod
}

func TestADeathCausedByDeletionNamesTheDeleterTheGuardNoted(t *testing.T) {
	// The runner ended at Start+10m, of the SIGTERM of a deletion begun at
	// Start+9m50s.
	pod := terminating(podtest.Runner("ci", "r").Terminated("runner", 143, "Error"), podtest.Start.Add(9*time.Minute+50*time.Second))
	w := newWatcher(t, pod)
	require.NoError(t, w.Deaths.MarkDeleted(context.Background(), pod, "alice", "override"))
	reconcile(t, w, pod)
	evs := events(t, w, death.ReasonDied)
	require.Len(t, evs, 1)
	assert.Equal(t, `runner "runner" died: sigterm; exit 143 (signal 15), reason Error; ended by its pod's deletion by alice`, evs[0].Note)
}

func TestADeathCausedByAnUnreviewedDeletionSaysSo(t *testing.T) {
	pod := terminating(podtest.Runner("ci", "r").Terminated("runner", 143, "Error"), podtest.Start.Add(9*time.Minute+50*time.Second))
	w := newWatcher(t, pod)
	reconcile(t, w, pod)
	evs := events(t, w, death.ReasonDied)
	require.Len(t, evs, 1)
	assert.Contains(t, evs[0].Note, "ended by its pod's deletion (not reviewed")
}

func TestADeathBeforeTheDeletionIsNotBlamedOnIt(t *testing.T) {
	pod := terminating(podtest.Runner("ci", "r").Terminated("runner", 1, "Error"), podtest.Start.Add(20*time.Minute))
	w := newWatcher(t, pod)
	require.NoError(t, w.Deaths.MarkDeleted(context.Background(), pod, "alice", "override"))
	reconcile(t, w, pod)
	evs := events(t, w, death.ReasonDied)
	require.Len(t, evs, 1)
	assert.Equal(t, `runner "runner" died: error-exit; exit 1, reason Error; pod deleted afterwards by alice`, evs[0].Note, "it had died before anyone deleted the pod")
}

func TestPodsOutsideOptedInNamespacesAreIgnored(t *testing.T) {
	pod := podtest.Runner("other", "r").Terminated("runner", 1, "Error").Obj()
	w := newWatcher(t, pod)
	reconcile(t, w, pod)
	assert.Empty(t, events(t, w, death.ReasonDied))
}

func TestAStuckRunnerIsReportedOnceAndCounted(t *testing.T) {
	pod := podtest.Runner("ci", "stuck").Waiting("runner", "ImagePullBackOff").Obj()
	pod.CreationTimestamp = metav1.NewTime(podtest.Start)
	pod.Status.ContainerStatuses[0].State.Waiting.Message = `pull access denied: 401 Unauthorized`
	w := newWatcher(t, pod)
	res := reconcile(t, w, pod)
	assert.Equal(t, 10*time.Minute, res.RequeueAfter, "come back to follow the reason")
	reconcile(t, w, pod)
	evs := events(t, w, death.ReasonStuck)
	require.Len(t, evs, 1)
	assert.Equal(t, `runner "runner" has not started after 1h0m0s: ImagePullBackOff: pull access denied: 401 Unauthorized`, evs[0].Note)
	assert.Equal(t, 1.0, testutil.ToFloat64(stuckGauge.WithLabelValues("ci", "ImagePullBackOff")))

	pod = podtest.Runner("ci", "stuck").Running("runner").Obj()
	got := &corev1.Pod{}
	require.NoError(t, w.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	got.Status = pod.Status
	update(t, w, got)
	reconcile(t, w, got)
	assert.Equal(t, 0, testutil.CollectAndCount(stuckGauge), "it started: no longer stuck")
}

func TestARunnerNotYetPastTheThresholdIsCheckedAgainLater(t *testing.T) {
	pod := podtest.Runner("ci", "slow").Obj()
	pod.CreationTimestamp = metav1.NewTime(podtest.Start.Add(55 * time.Minute))
	w := newWatcher(t, pod)
	res := reconcile(t, w, pod)
	assert.Equal(t, 5*time.Minute, res.RequeueAfter)
	assert.Empty(t, events(t, w, death.ReasonStuck))
}

func TestADeathWaitsForTheVitalsSidecarsFinalReading(t *testing.T) {
	final := `{"v":1,"ts":"2026-11-01T12:10:01Z","cg":"v1","oom":0,"oom_kill":1,"peak":67108864,"limit":67108864}`
	pod := podtest.Runner("ci", "r").Terminated("runner", 137, "OOMKilled").Obj()
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: runnerpod.VitalsContainer,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	w := newWatcher(t, pod)
	ended := podtest.Start.Add(10 * time.Minute)
	w.Now = func() time.Time { return ended.Add(2 * time.Second) }

	res := reconcile(t, w, pod)
	assert.Positive(t, res.RequeueAfter, "the sidecar still runs: come back")
	assert.Empty(t, events(t, w, death.ReasonDied), "no record without the final reading yet")

	pod.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: final}}
	update(t, w, pod)
	reconcile(t, w, pod)
	evs := events(t, w, death.ReasonDied)
	require.Len(t, evs, 1)
	r, err := death.Parse(evs[0].Annotations[death.RecordAnnotation])
	require.NoError(t, err)
	require.NotNil(t, r.Vitals, "the record carries the final reading")
	assert.Equal(t, uint64(1), r.Vitals.OOMKill)
}

func TestADeathIsRecordedWithoutVitalsOnceTheSidecarIsLate(t *testing.T) {
	pod := podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").Obj()
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: runnerpod.VitalsContainer,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	w := newWatcher(t, pod)
	w.Now = func() time.Time { return podtest.Start.Add(10*time.Minute + VitalsWait) }
	assert.Zero(t, reconcile(t, w, pod).RequeueAfter)
	assert.Len(t, events(t, w, death.ReasonDied), 1)
}

// gone reconciles a pod the cache has dropped, whose last state the delete
// event left.
func gone(t *testing.T, w *Watcher, last *corev1.Pod) {
	t.Helper()
	w.final.Store(client.ObjectKeyFromObject(last), last)
	reconcile(t, w, last)
}

func TestADeathReportedJustBeforeThePodWentIsStillRecorded(t *testing.T) {
	w := newWatcher(t)
	gone(t, w, podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").Obj())
	evs := events(t, w, death.ReasonDied)
	require.Len(t, evs, 1)
	assert.Equal(t, `runner "runner" died: clean-exit; exit 0, reason Completed`, evs[0].Note)
}

func TestAPodRemovedWhileItsRunnerRanIsRecordedAsSuch(t *testing.T) {
	w := newWatcher(t)
	// Pod GC removing the pods of a lost node: an exempt principal, never
	// reviewed, and the kubelet never reports the end.
	last := podtest.Runner("ci", "lost").Node("n-gone").Running("runner").Obj()
	w.final.Store(client.ObjectKeyFromObject(last), last)
	assert.Equal(t, deleterWait, reconcile(t, w, last).RequeueAfter, "a second look for the guard's note of the deleter")
	assert.Empty(t, events(t, w, death.ReasonDied))
	reconcile(t, w, last)
	evs := events(t, w, death.ReasonDied)
	require.Len(t, evs, 1)
	assert.Equal(t, `runner "runner" died: deleted-running; ended by its pod's deletion (not reviewed: an exempt principal, or the guard was down)`, evs[0].Note)
	gone(t, w, last)
	assert.Len(t, events(t, w, death.ReasonDied), 1, "a repeat delete event records nothing new")
}

func TestAGonePodThatNeverRanLeavesNoRecord(t *testing.T) {
	w := newWatcher(t)
	gone(t, w, podtest.Runner("ci", "r").Waiting("runner", "ContainerCreating").Obj())
	assert.Empty(t, events(t, w, death.ReasonDied))
}

func TestAnIdlePoolRunnerWaitingForItsPollerIsNotStuck(t *testing.T) {
	w := podtest.Runner("ci", "idle").Waiting("runner", "PodInitializing")
	w.Spec.InitContainers = []corev1.Container{{Name: "poller", Image: "x"}}
	w.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "poller", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	pod := w.Obj()
	pod.CreationTimestamp = metav1.NewTime(podtest.Start)
	wt := newWatcher(t, pod)
	assert.Equal(t, ctrl.Result{}, reconcile(t, wt, pod))
	assert.Empty(t, events(t, wt, death.ReasonStuck), "a poller-gated runner starts only with a job")
}

func TestAForceDeletedRunnerNamesTheDeleterTheGuardNotedLate(t *testing.T) {
	w := newWatcher(t)
	last := podtest.Runner("ci", "forced").Running("runner").Obj()
	w.final.Store(client.ObjectKeyFromObject(last), last)
	reconcile(t, w, last)
	require.NoError(t, w.Deaths.MarkDeleted(context.Background(), last, "alice", "override"))
	reconcile(t, w, last)
	evs := events(t, w, death.ReasonDied)
	require.Len(t, evs, 1)
	assert.Equal(t, `runner "runner" died: deleted-running; ended by its pod's deletion by alice`, evs[0].Note)
}
