package recorder

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// stripped is pod as the watcher reads it from its cache: through the
// production transform, so a test cannot pass on a field the cache drops.
func stripped(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := compact(pod.DeepCopy())
	require.NoError(t, err)
	return out.(*cachedPod).pod()
}

func newWatcher(t *testing.T, pods ...*corev1.Pod) *Watcher {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(s))
	require.NoError(t, v1alpha1.AddToScheme(s))
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci", Labels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	deathsTotal.Reset()
	jobsEndedTotal.Reset()
	peakRatio.Reset()
	stuckGauge.Reset()
	cache, err := NewPodCache(fakePods{k8sfake.NewClientset()}, 0)
	require.NoError(t, err)
	w := &Watcher{
		Pods: cache, Client: c, Reader: c, Recorder: events.NewFakeRecorder(100), Config: configtest.Enforcing(),
		Namespaces: labels.SelectorFromSet(labels.Set{runnerpod.EnabledNamespaceLabel: "true"}),
		StuckAfter: 10 * time.Minute, Now: func() time.Time { return podtest.Start.Add(time.Hour) },
		stuck: map[types.NamespacedName]string{}, gone: map[types.NamespacedName][]gonePod{}, seen: NewSeenSet(100),
	}
	for _, p := range pods {
		update(t, w, p)
	}
	return w
}

func reconcileOnce(t *testing.T, w *Watcher, pod *corev1.Pod) ctrl.Result {
	t.Helper()
	res, err := w.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(pod)})
	require.NoError(t, err)
	return res
}

// update stores pod in the watcher's pod cache as its informer would.
func update(t *testing.T, w *Watcher, pod *corev1.Pod) {
	t.Helper()
	out, err := compact(pod.DeepCopy())
	require.NoError(t, err)
	require.NoError(t, w.Pods.informer.GetIndexer().Update(out))
}

func records(t *testing.T, w *Watcher) []death.Record {
	t.Helper()
	list := &v1alpha1.RunnerDeathList{}
	require.NoError(t, w.Client.List(context.Background(), list))
	var out []death.Record
	for i := range list.Items {
		out = append(out, death.FromObject(&list.Items[i]))
	}
	return out
}

// notified drains the Events the watcher wrote.
func notified(w *Watcher) []string {
	var out []string
	for {
		select {
		case e := <-w.Recorder.(*events.FakeRecorder).Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestADeathIsRecordedOnceAcrossResyncsAndRestarts(t *testing.T) {
	pod := podtest.Runner("ci", "r").Terminated("runner", 1, "Error").Obj()
	w := newWatcher(t, pod)
	for range 3 {
		reconcileOnce(t, w, pod)
	}
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, string(death.ErrorExit), rs[0].Class)
	assert.Equal(t, []string{`Warning RunnerDied runner "runner" died: error-exit; exit 1, reason Error`}, notified(w))
	assert.Equal(t, 1.0, testutil.ToFloat64(deathsTotal.WithLabelValues("ci", "error-exit")))

	// A restarted watcher, or another leader, long after the Events expired:
	// the RunnerDeath is still there, so nothing is written or counted again.
	restarted := newWatcher(t)
	restarted.Client, restarted.Pods = w.Client, w.Pods
	reconcileOnce(t, restarted, pod)
	assert.Len(t, records(t, w), 1)
	assert.Empty(t, notified(restarted))
	assert.Equal(t, 0, testutil.CollectAndCount(deathsTotal), "not counted again")
}

func TestARestartInPlaceIsANewDeath(t *testing.T) {
	pod := podtest.Runner("ci", "r").Restarting("runner", 1, "Error").Obj()
	w := newWatcher(t, pod)
	reconcileOnce(t, w, pod)
	require.Len(t, records(t, w), 1)
	// It runs again and dies again, with a new container ID.
	cs := &pod.Status.ContainerStatuses[0]
	cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", ContainerID: "containerd://runner-2",
		StartedAt: metav1.NewTime(podtest.Start.Add(20 * time.Minute)), FinishedAt: metav1.NewTime(podtest.Start.Add(30 * time.Minute))}}
	cs.ContainerID, cs.RestartCount = "containerd://runner-3", 2
	update(t, w, pod)
	reconcileOnce(t, w, pod)
	var classes []string
	for _, r := range records(t, w) {
		classes = append(classes, r.Class)
	}
	assert.ElementsMatch(t, []string{"error-exit", "cgroup-oom"}, classes)
}

func terminating(w *podtest.Wrapper, deletedAt time.Time) *corev1.Pod {
	pod := w.Deleted(deletedAt, 30).Obj()
	pod.Finalizers = []string{"test/keep"} // the fake client keeps a terminating object only with a finalizer
	return pod
}

func noteOf(t *testing.T, w *Watcher, pod *corev1.Pod, requester, rule string, at time.Time) {
	t.Helper()
	require.NoError(t, w.Client.Create(context.Background(), &v1alpha1.RunnerDeletion{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: string(pod.UID)},
		Deletion:   v1alpha1.DeletionNote{Pod: pod.Name, UID: string(pod.UID), Requester: requester, Rule: rule, Operation: "delete", Time: metav1.NewTime(at)},
	}))
}

func TestADeathCausedByDeletionNamesTheDeleterTheGuardNoted(t *testing.T) {
	// The runner ended at Start+10m, of the SIGTERM of a deletion begun at
	// Start+9m50s.
	began := podtest.Start.Add(9*time.Minute + 50*time.Second)
	pod := terminating(podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Annotate(runnerpod.AllowDelete, "drain"), began)
	w := newWatcher(t, pod)
	noteOf(t, w, pod, "alice", "override", began)
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, "alice", rs[0].DeletedBy)
	assert.Equal(t, "override", rs[0].DeleteRule)
	assert.Equal(t, []string{`Warning RunnerDied runner "runner" died: sigterm; exit 143 (signal 15), reason Error; ended by its pod's deletion, requested by alice (allowed: override)`}, notified(w))
}

func TestADeathCausedByAnUnreviewedDeletionSaysSo(t *testing.T) {
	pod := terminating(podtest.Runner("ci", "r").Terminated("runner", 143, "Error"), podtest.Start.Add(9*time.Minute+50*time.Second))
	w := newWatcher(t, pod)
	reconcileOnce(t, w, pod)
	require.Len(t, records(t, w), 1)
	assert.Contains(t, notified(w)[0], "ended by its pod's deletion; the delete was not reviewed")
}

func TestAGitLabJobEndedByItsOwnerIsNotADeath(t *testing.T) {
	began := podtest.Start.Add(9*time.Minute + 30*time.Second)
	pod := terminating(podtest.GitLab("ci", "r").Annotate(runnerpod.CreatedBy, "system:serviceaccount:glr:gitlab-runner").Terminated("build", 137, "Error"), began)
	w := newWatcher(t, pod)
	noteOf(t, w, pod, "system:serviceaccount:glr:gitlab-runner", "job-owner", began)
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, string(death.JobEnded), rs[0].Class)
	assert.Equal(t, []string{`Normal RunnerJobEnded runner "build": its job ended (job-ended); exit 137 (signal 9), reason Error; the job's owner, system:serviceaccount:glr:gitlab-runner, ended the job by deleting its pod`}, notified(w))
	assert.Equal(t, 0, testutil.CollectAndCount(deathsTotal), "not among the deaths")
	assert.Equal(t, 1.0, testutil.ToFloat64(jobsEndedTotal.WithLabelValues("ci")))
}

func TestPodsOutsideOptedInNamespacesAreIgnored(t *testing.T) {
	pod := podtest.Runner("other", "r").Terminated("runner", 1, "Error").Obj()
	w := newWatcher(t, pod)
	reconcileOnce(t, w, pod)
	assert.Empty(t, records(t, w))
}

func TestAStuckRunnerIsReportedWithTheReasonCurrentWhenWritten(t *testing.T) {
	pod := podtest.Runner("ci", "stuck").Waiting("runner", "PodInitializing").Obj()
	pod.CreationTimestamp = metav1.NewTime(podtest.Start)
	w := newWatcher(t, pod)
	res := reconcileOnce(t, w, pod)
	assert.Equal(t, 10*time.Minute, res.RequeueAfter, "come back to follow the reason")
	reconcileOnce(t, w, pod)
	assert.Equal(t, []string{`Warning RunnerStuck runner "runner" has not started after 1h0m0s: PodInitializing`}, notified(w), "once per reason")

	pod.Status.ContainerStatuses[0].State.Waiting = &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "pull access denied: 401 Unauthorized"}
	update(t, w, pod)
	reconcileOnce(t, w, pod)
	assert.Equal(t, []string{`Warning RunnerStuck runner "runner" has not started after 1h0m0s: ErrImagePull: pull access denied: 401 Unauthorized`}, notified(w),
		"a new reason is reported as it is now")
	assert.Equal(t, 1.0, testutil.ToFloat64(stuckGauge.WithLabelValues("ci", "ErrImagePull")))
	assert.Equal(t, 1, testutil.CollectAndCount(stuckGauge), "the old reason's series went with it")

	pod.Status = podtest.Runner("ci", "stuck").Running("runner").Obj().Status
	update(t, w, pod)
	reconcileOnce(t, w, pod)
	assert.Equal(t, 0, testutil.CollectAndCount(stuckGauge), "it started: no longer stuck")
}

func TestARunnerNotYetPastTheThresholdIsCheckedAgainLater(t *testing.T) {
	pod := podtest.Runner("ci", "slow").Obj()
	pod.CreationTimestamp = metav1.NewTime(podtest.Start.Add(55 * time.Minute))
	w := newWatcher(t, pod)
	assert.Equal(t, 5*time.Minute, reconcileOnce(t, w, pod).RequeueAfter)
	assert.Empty(t, notified(w))
}

func TestADeathWaitsForTheVitalsSidecarsFinalReading(t *testing.T) {
	final := `{"v":1,"ts":"2026-11-01T12:10:01Z","cg":"v1","oom":0,"oom_kill":1,"peak":67108864,"limit":67108864}`
	pod := podtest.Runner("ci", "r").Terminated("runner", 137, "OOMKilled").SidecarRunning(runnerpod.VitalsContainer).Obj()
	w := newWatcher(t, pod)
	ended := podtest.Start.Add(10 * time.Minute)
	w.Now = func() time.Time { return ended.Add(2 * time.Second) }

	assert.Equal(t, death.VitalsWait-2*time.Second, reconcileOnce(t, w, pod).RequeueAfter, "the sidecar still runs: come back")
	assert.Empty(t, records(t, w), "no record without the final reading yet")

	pod.Status.InitContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", Message: final}}
	update(t, w, pod)
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	require.NotNil(t, rs[0].Vitals, "the record carries the final reading")
	assert.Equal(t, int64(1), rs[0].Vitals.OOMKill)
	assert.Equal(t, 1, testutil.CollectAndCount(peakRatio), "the peak against the limit is observed")
}

// gone reconciles a pod the cache has dropped, whose last state the delete
// event left, at.
func gone(t *testing.T, w *Watcher, last *corev1.Pod, at time.Time) ctrl.Result {
	t.Helper()
	now := w.Now
	w.Now = func() time.Time { return at }
	w.removed(stripped(t, last))
	w.Now = now
	return reconcileOnce(t, w, last)
}

func TestADeathReportedJustBeforeThePodWentIsStillRecorded(t *testing.T) {
	w := newWatcher(t)
	gone(t, w, podtest.Runner("ci", "r").Terminated("runner", 2, "Error").Obj(), podtest.Start.Add(time.Hour))
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, string(death.ErrorExit), rs[0].Class)
	assert.Empty(t, w.gone, "forgotten once recorded")
}

func TestAPodRemovedWhileItsRunnerRanIsRecordedAsSuch(t *testing.T) {
	w := newWatcher(t)
	// Pod GC removing the pods of a lost node: an exempt principal, never
	// reviewed, and the kubelet never reports the end.
	last := podtest.Runner("ci", "lost").Node("n-gone").Running("runner").Obj()
	at := w.Now().Add(-time.Second)
	assert.Equal(t, deletion.NoteWait-time.Second, gone(t, w, last, at).RequeueAfter, "a look for the guard's note of the deleter")
	assert.Empty(t, records(t, w))
	w.Now = func() time.Time { return at.Add(deletion.NoteWait) }
	reconcileOnce(t, w, last)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, string(death.DeletedRunning), rs[0].Class)
	assert.True(t, rs[0].Deleted)
	gone(t, w, last, at)
	assert.Len(t, records(t, w), 1, "a repeat delete event records nothing new")
}

func TestAForceDeletedRunnerNamesTheDeleterWhoseNoteArrivesLate(t *testing.T) {
	w := newWatcher(t)
	last := podtest.Runner("ci", "forced").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj()
	at := w.Now()
	assert.Positive(t, gone(t, w, last, at).RequeueAfter)
	noteOf(t, w, last, "alice", "override", at.Add(-50*time.Millisecond))
	reconcileOnce(t, w, last)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, "alice", rs[0].DeletedBy)
}

func TestAPodRecreatedUnderItsNameDoesNotHideItsPredecessorsDeath(t *testing.T) {
	// Legacy ARC recreates a runner's pod under the Runner's name: the new
	// pod can be in the cache before the old one's death is planned.
	last := podtest.ARCLegacy("ci", "r").Running("runner").Obj()
	next := podtest.ARCLegacy("ci", "r").Obj()
	next.UID = "uid-r-2"
	w := newWatcher(t, next)
	at := w.Now()
	assert.Equal(t, deletion.NoteWait, gone(t, w, last, at).RequeueAfter, "the old pod's death waits for a note")
	w.Now = func() time.Time { return at.Add(deletion.NoteWait) }
	reconcileOnce(t, w, next)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, string(last.UID), rs[0].UID)
	assert.Equal(t, string(death.DeletedRunning), rs[0].Class)
	assert.Empty(t, w.gone, "forgotten once recorded")
}

func TestAGonePodThatNeverRanLeavesNoRecord(t *testing.T) {
	w := newWatcher(t)
	gone(t, w, podtest.Runner("ci", "r").Waiting("runner", "ContainerCreating").Obj(), w.Now())
	assert.Empty(t, records(t, w))
	assert.Empty(t, w.gone)
}

func TestAnIdlePoolRunnerWaitingForItsPollerIsNotStuck(t *testing.T) {
	w := podtest.Runner("ci", "idle").Waiting("runner", "PodInitializing")
	w.Spec.InitContainers = []corev1.Container{{Name: "poller", Image: "x"}}
	w.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "poller", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	pod := w.Obj()
	pod.CreationTimestamp = metav1.NewTime(podtest.Start)
	wt := newWatcher(t, pod)
	assert.Equal(t, ctrl.Result{}, reconcileOnce(t, wt, pod))
	assert.Empty(t, notified(wt), "a poller-gated runner starts only with a job")
}

func TestADeathInANamespaceBeingDeletedIsCountedAndLoggedNotRetried(t *testing.T) {
	pod := podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Obj()
	w := newWatcher(t, pod)
	creates := 0
	// The error the API server's namespace lifecycle admission returns for
	// a create in a terminating namespace (the fleet simulation deletes a
	// runner namespace through the real one).
	w.Client = interceptor.NewClient(w.Client.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates++
			err := apierrors.NewForbidden(v1alpha1.GroupVersion.WithResource("runnerdeaths").GroupResource(), obj.GetName(),
				errors.New("unable to create new content in namespace ci because it is being terminated"))
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: corev1.NamespaceTerminatingCause, Field: "ci"})
			return err
		},
	})
	for range 2 {
		assert.Equal(t, ctrl.Result{}, reconcileOnce(t, w, pod), "no retry: no retry can store it")
	}
	assert.Equal(t, 1, creates, "tried once")
	assert.Empty(t, notified(w), "no Event can be written there either")
	assert.Equal(t, 1.0, testutil.ToFloat64(deathsTotal.WithLabelValues("ci", "sigterm")), "still counted")
}
