package recorder

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// ephemeralRunner is an ARC EphemeralRunner as ARC's listener leaves it
// once it assigned a job (actions.github.com/v1alpha1 status fields).
func ephemeralRunner(name string, uid types.UID) *unstructured.Unstructured {
	er := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner",
		"metadata": map[string]any{"namespace": "ci", "name": name},
		"status": map[string]any{
			"phase": "Running", "jobRequestId": int64(1001), "jobId": "7311", "workflowRunId": int64(900123),
			"jobRepositoryName": "acme/app", "jobWorkflowRef": "acme/app/.github/workflows/ci.yml@refs/heads/main", "jobDisplayName": "build (linux)",
		},
	}}
	er.SetUID(uid)
	return er
}

func TestAnARCRunnersRecordNamesTheJobOfItsOwnEphemeralRunner(t *testing.T) {
	pod := podtest.ARCScaleSet("ci", "r").Terminated("runner", 1, "Error").Obj()
	w := newWatcher(t, pod)
	require.NoError(t, w.Client.Create(context.Background(), ephemeralRunner("r", "er-r")))
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, &v1alpha1.Job{ID: "7311", RequestID: "1001", Run: "900123", Project: "acme/app",
		Workflow: "acme/app/.github/workflows/ci.yml@refs/heads/main", Name: "build (linux)", Source: "EphemeralRunner/r"}, rs[0].Job)
	list := &v1alpha1.RunnerDeathList{}
	require.NoError(t, w.Client.List(context.Background(), list))
	assert.Equal(t, "7311", list.Items[0].Labels[death.JobLabel], "found by its job")
	assert.Equal(t, []string{`Warning RunnerDied runner "runner" died: error-exit; job 7311; exit 1, reason Error`}, notified(w))
}

func TestAnEphemeralRunnerThatIsNotThePodsOwnerNamesNoJob(t *testing.T) {
	pod := podtest.ARCScaleSet("ci", "r").Terminated("runner", 1, "Error").Obj()
	w := newWatcher(t, pod)
	// A later EphemeralRunner of the same name: another runner's job.
	require.NoError(t, w.Client.Create(context.Background(), ephemeralRunner("r", "someone-else")))
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Nil(t, rs[0].Job)
}

func TestAnARCRunnerWhoseEphemeralRunnerIsGoneIsStillRecorded(t *testing.T) {
	pod := podtest.ARCScaleSet("ci", "r").Terminated("runner", 1, "Error").Obj()
	w := newWatcher(t, pod)
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Nil(t, rs[0].Job)
}

// lateNotes is a client to which the notes show only from its misses+1st
// read on: the guard's note of an EphemeralRunner's deletion, written after
// its answer, landing after ARC's finalizer removed the finished runner's
// pod (seen on the real fleet under load).
type lateNotes struct {
	client.Client
	misses atomic.Int32
}

func (c *lateNotes) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1alpha1.RunnerDeletion); ok && c.misses.Add(-1) >= 0 {
		return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("runnerdeletions").GroupResource(), key.Name)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

func TestAnARCRunnersRecordWaitsForTheNoteOfItsEphemeralRunnersDeletionToNameItsJob(t *testing.T) {
	pod := podtest.ARCScaleSet("ci", "r").Terminated("runner", 1, "Error").Obj()
	w := newWatcher(t, pod)
	erNote := &v1alpha1.RunnerDeletion{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: "er-r"},
		Deletion: v1alpha1.DeletionNote{Kind: arcscaleset.Kind, Pod: "r", UID: "er-r", Requester: "arc", Operation: "delete",
			Job: &v1alpha1.Job{RequestID: "1001", Source: "EphemeralRunner/r"}}}
	require.NoError(t, w.Client.Create(context.Background(), erNote))
	late := &lateNotes{Client: w.Client}
	late.misses.Store(2)
	w.Client = late
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, &v1alpha1.Job{RequestID: "1001", Source: "EphemeralRunner/r"}, rs[0].Job, "the job the note kept, read once it landed")
	assert.Less(t, late.misses.Load(), int32(0), "read past its misses")
}

func TestAGitLabBuildPodsRecordNamesItsJobAndProject(t *testing.T) {
	pod := podtest.GitLab("ci", "runner-x-project-42-concurrent-0").Terminated("build", 1, "Error").
		Annotate(gitlab.JobIDAnnotation, "5521").Annotate(gitlab.JobNameAnnotation, "test").
		Annotate(gitlab.JobURLAnnotation, "https://gitlab.example.com/acme/app/-/jobs/5521").
		Label(gitlab.ProjectIDLabel, "42").Obj()
	w := newWatcher(t)
	// As the production cache keeps it: with the keys the presets name.
	labels, annotations := runnerpod.JobPodKeys(w.Config.Presets)
	out, err := compactor{labels: labels, annotations: annotations}.compact(pod.DeepCopy())
	require.NoError(t, err)
	require.NoError(t, w.Pods.informer.GetIndexer().Update(out))
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, &v1alpha1.Job{ID: "5521", Project: "42", Name: "test", URL: "https://gitlab.example.com/acme/app/-/jobs/5521", Source: runnerpod.JobFromPodMarks}, rs[0].Job)
}

func TestARecordKeepsItsNodesStateAndANodeBeingRemovedExplainsTheDeath(t *testing.T) {
	pod := podtest.Runner("ci", "r").Node("n1").Terminated("runner", 143, "Error").Deleted(podtest.Start.Add(9*time.Minute), 30).Obj()
	w := newWatcher(t, pod)
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: death.TaintAutoscalerDelete, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	require.NoError(t, w.Client.Create(context.Background(), n))
	w.Now = func() time.Time { return podtest.Start.Add(10*time.Minute + deletion.NoteWait) }
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	assert.Equal(t, string(death.NodeDisrupted), rs[0].Class)
	assert.Equal(t, &v1alpha1.NodeState{Taints: []string{death.TaintAutoscalerDelete}}, rs[0].NodeState)
	assert.Contains(t, rs[0].ClassBasis, "cluster autoscaler")
}

// ARC deletes the EphemeralRunner before the record is written: the job
// the guard's note kept, read when it admitted the deletion, names it.
func TestAnARCRecordNamesTheJobTheGuardsNoteKeptOnceTheEphemeralRunnerIsGone(t *testing.T) {
	began := podtest.Start.Add(9*time.Minute + 50*time.Second)
	pod := terminating(podtest.ARCScaleSet("ci", "r").Terminated("runner", 143, "Error"), began)
	w := newWatcher(t, pod)
	require.NoError(t, w.Client.Create(context.Background(), &v1alpha1.RunnerDeletion{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: string(pod.UID)},
		Deletion: v1alpha1.DeletionNote{Pod: pod.Name, UID: string(pod.UID), Requester: "arc", Rule: string(runnerpod.RuleBusy), Operation: "delete", Time: metav1.NewTime(began),
			Job: &v1alpha1.Job{ID: "7311", Run: "900123", Project: "acme/app", Source: "EphemeralRunner/r"}},
	}))
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	require.NotNil(t, rs[0].Job, "no EphemeralRunner left to read")
	assert.Equal(t, "7311", rs[0].Job.ID)
	assert.Equal(t, "acme/app", rs[0].Job.Project)
}

func TestAnARCRunnersRecordNamesTheJobTheLeadersWatchSawOnItsEphemeralRunnerOnceThatIsGone(t *testing.T) {
	pod := podtest.ARCScaleSet("ci", "r").Terminated("runner", 1, "Error").Obj()
	w := newWatcher(t, pod)
	w.Jobs = NewLastJobs(LastJobsKept)
	keepER(w.Jobs, ephemeralRunner("r", "er-r"))
	// No note of the EphemeralRunner's deletion: the record does not wait
	// for one, and no review's word is needed.
	late := &lateNotes{Client: w.Client}
	late.misses.Store(1 << 20)
	w.Client = late
	reconcileOnce(t, w, pod)
	rs := records(t, w)
	require.Len(t, rs, 1)
	require.NotNil(t, rs[0].Job)
	assert.Equal(t, "7311", rs[0].Job.ID)
	assert.Equal(t, "1001", rs[0].Job.RequestID)
	assert.Equal(t, "acme/app", rs[0].Job.Project)
	assert.Equal(t, int32(1<<20), late.misses.Load(), "no note read")
}

func TestLastJobsKeepsEveryLiveRunnersJobAndTheNewestDeletionsUpToItsBound(t *testing.T) {
	l := NewLastJobs(2)
	for _, n := range []string{"a", "b", "c"} {
		keepER(l, ephemeralRunner(n, types.UID("uid-"+n)))
	}
	for _, n := range []string{"a", "b", "c"} {
		assert.NotNil(t, l.Job(types.UID("uid-"+n)), "live runners are all kept: %s", n)
	}
	dropER(l, ephemeralRunner("a", "uid-a"))
	dropER(l, ephemeralRunner("b", "uid-b"))
	dropER(l, ephemeralRunner("a", "uid-a")) // seen again: still the oldest
	dropER(l, ephemeralRunner("c", "uid-c"))
	assert.Nil(t, l.Job("uid-a"), "the oldest deletion went first")
	assert.NotNil(t, l.Job("uid-b"))
	assert.NotNil(t, l.Job("uid-c"))

	idle := ephemeralRunner("d", "uid-d")
	unstructured.RemoveNestedField(idle.Object, "status")
	keepER(l, ephemeralRunner("d", "uid-d"))
	keepER(l, idle)
	assert.NotNil(t, l.Job("uid-d"), "a job once seen is not forgotten")
	keepER(l, idle.DeepCopy())
	dropER(l, idle)
	assert.NotNil(t, l.Job("uid-d"), "nor at its runner's deletion")

	var none *LastJobs
	keepER(none, ephemeralRunner("e", "uid-e"))
	dropER(none, ephemeralRunner("e", "uid-e"))
	assert.Nil(t, none.Job("uid-e"), "nil keeps nothing")
	assert.False(t, none.Unseen("uid-e", time.Now()), "and says nothing unseen")
}

func TestLastJobsSaysAnOwnerUnseenOnlyWhenItsWatchRanSinceBeforeThePodAndNeverHeldIt(t *testing.T) {
	synced := time.Date(2026, 11, 28, 6, 0, 0, 0, time.UTC)
	after := synced.Add(2 * clockSkew)
	cases := []struct {
		name    string
		watch   func(l *LastJobs)
		uid     types.UID
		created time.Time
		unseen  bool
	}{
		{"no watch runs", func(l *LastJobs) {}, "uid-x", after, false},
		{"the watch never held it, pod created after it synced", func(l *LastJobs) { l.watching(synced) }, "uid-x", after, true},
		{"pod created before the watch synced", func(l *LastJobs) { l.watching(synced) }, "uid-x", synced.Add(-time.Hour), false},
		{"pod created within the clocks' skew of the sync", func(l *LastJobs) { l.watching(synced) }, "uid-x", synced.Add(clockSkew / 2), false},
		{"the watch holds it", func(l *LastJobs) { l.watching(synced); keepER(l, ephemeralRunner("x", "uid-x")) }, "uid-x", after, false},
		{"the watch saw it deleted", func(l *LastJobs) { l.watching(synced); dropER(l, ephemeralRunner("x", "uid-x")) }, "uid-x", after, false},
		{"the watch stopped", func(l *LastJobs) { l.watching(synced); l.stopped() }, "uid-x", after, false},
		{"no owner named", func(l *LastJobs) { l.watching(synced) }, "", after, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := NewLastJobs(LastJobsKept)
			c.watch(l)
			assert.Equal(t, c.unseen, l.Unseen(c.uid, c.created))
		})
	}
}

func TestARecordOfAPodNamingAnEphemeralRunnerTheLeaderNeverSawReadsItsNoteOnceWithoutWaiting(t *testing.T) {
	pod := podtest.ARCScaleSet("ci", "r").Terminated("runner", 1, "Error").Obj()
	pod.CreationTimestamp = metav1.Now()
	w := newWatcher(t, pod)
	w.Jobs = NewLastJobs(LastJobsKept)
	w.Jobs.watching(time.Now().Add(-time.Hour))
	late := &lateNotes{Client: w.Client}
	late.misses.Store(1 << 20)
	w.Client = late
	reconcileOnce(t, w, pod)
	require.Len(t, records(t, w), 1)
	assert.Equal(t, int32(1<<20-1), late.misses.Load(), "one read of the note, no wait for one that cannot come")
}

// keepER and dropER hand l an EphemeralRunner as the follower does, with
// the job ARC's fleet reads from it.
func keepER(l *LastJobs, er *unstructured.Unstructured) { l.keep(er, arcscaleset.Job(er)) }
func dropER(l *LastJobs, er *unstructured.Unstructured) { l.drop(er, arcscaleset.Job(er)) }
