//go:build e2e

package api

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func writeAdminKubeconfig(c *apitest.Cluster, dir string) error {
	u, err := c.Env.AddUser(envtest.User{Name: "operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return err
	}
	adminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	return os.WriteFile(adminKubeconfig, kc, 0o600)
}

// setStatus writes the pod's status as the kubelet would (whose status
// patches no write of the pod's metadata, such as the leader's marks,
// conflicts with), waits for the leader's marks to follow, and leaves pod
// as it is then.
func setStatus(t *testing.T, pod *corev1.Pod, status corev1.PodStatus) {
	t.Helper()
	writeStatus(t, pod, status)
	*pod = *marksSettled(t, pod)
}

// writeStatus is setStatus without waiting for the leader's marks: for a
// test in which no replica leads.
func writeStatus(t *testing.T, pod *corev1.Pod, status corev1.PodStatus) {
	t.Helper()
	got := &corev1.Pod{}
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
			return err
		}
		got.Status = status
		return admin.Status().Update(context.Background(), got)
	}))
	*pod = *got
}

func TestTheWatcherRecordsEachDeathOnceAcrossTwoReplicas(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := busyRunner(ns, "dies")
	// A pool runner that restarts in place (the API server refuses a
	// terminated container going back to waiting under restartPolicy Never).
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod = create(t, nil, pod)
	ended := podtest.Runner(ns, "dies").Terminated("runner", 1, "Error").Obj().Status
	setStatus(t, pod, ended)
	r := oneDeath(t, pod)
	setStatus(t, pod, ended) // a resync of the same status
	caughtUp(t)
	require.Len(t, deathsOf(t, pod), 1, "one death, one record, whichever replica leads")
	assert.Equal(t, string(death.ErrorExit), r.Class)
	eventually(t, func() bool { return len(diedEvents(t, pod)) == 1 }, "and a Warning Event to notify it")
	assert.Equal(t, `runner "runner" died: error-exit; exit 1, reason Error`, diedEvents(t, pod)[0].Note)

	// It restarts in place and dies again: a new death.
	again := podtest.Runner(ns, "dies").Restarting("runner", 1, "Error").Obj().Status
	again.ContainerStatuses[0].LastTerminationState.Terminated.ContainerID = "containerd://runner-2"
	again.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode = 139
	setStatus(t, pod, again)
	eventually(t, func() bool { return len(deathsOf(t, pod)) == 2 }, "a restart in place is a second death")
	caughtUp(t)
	assert.Len(t, deathsOf(t, pod), 2)
}

func diedEvents(t *testing.T, pod *corev1.Pod) []eventsv1.Event {
	t.Helper()
	return slices.DeleteFunc(podEvents(t, pod), func(e eventsv1.Event) bool {
		return e.Reason != death.ReasonDied || e.Regarding.UID != pod.UID
	})
}

func TestADeathCausedByAnOverrideDeleteNamesTheDeleter(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := busyRunner(ns, "overridden")
	pod.Annotations = map[string]string{runnerpod.AllowDelete: "rotate node"}
	pod = create(t, nil, pod)
	require.NoError(t, deletePod(as(t, "carol@example.com"), pod))
	// The kubelet stops the runner with SIGTERM and reports it.
	st := podtest.Runner(ns, "overridden").Terminated("runner", 143, "Error").Obj().Status
	st.ContainerStatuses[0].State.Terminated.StartedAt = metav1.NewTime(time.Now().Add(-3 * time.Minute))
	st.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(time.Now())
	setStatus(t, pod, st)
	r := oneDeath(t, pod)
	assert.True(t, r.Deleted)
	assert.Equal(t, "carol@example.com", r.DeletedBy)
	assert.Contains(t, runWhy(t, "overridden", "-n", ns), "ended by its pod's deletion, requested by carol@example.com (allowed: override)")
}

func TestTheWatcherKeepsRecordingAfterTheLeaderGoes(t *testing.T) {
	ns := newNamespace(t, nil)
	first := create(t, nil, busyRunner(ns, "before"))
	setStatus(t, first, podtest.Runner(ns, "before").Terminated("runner", 0, "Completed").Obj().Status)
	oneDeath(t, first)
	restartReplicas(t)
	second := create(t, nil, busyRunner(ns, "after"))
	setStatus(t, second, podtest.Runner(ns, "after").Terminated("runner", 2, "Error").Obj().Status)
	require.Eventually(t, func() bool { return len(deathsOf(t, second)) == 1 }, patience, 200*time.Millisecond, "the new leader records")
	caughtUp(t)
	assert.Len(t, deathsOf(t, first), 1, "a change of leader does not record a death twice")
}

// restartReplicas stops whichever replica leads, and restarts both: the
// other takes over and re-reads every pod.
func restartReplicas(t *testing.T) {
	t.Helper()
	for _, s := range []*apitest.Server{server, replica} {
		s.Stop()
		require.NoError(t, s.Start(context.Background()))
	}
}

func TestRecordsOutliveTheirEventsAndAreNotWrittenAgain(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, busyRunner(ns, "lasting"))
	setStatus(t, pod, podtest.Runner(ns, "lasting").Terminated("runner", 3, "Error").Obj().Status)
	r := oneDeath(t, pod)
	eventually(t, func() bool { return len(diedEvents(t, pod)) == 1 }, "notified")
	require.Eventually(t, func() bool { return len(diedEvents(t, pod)) == 0 }, 3*apitest.EventTTL, 500*time.Millisecond,
		"the API server expires the Event (--event-ttl)")
	restartReplicas(t)
	// The new leader lists every pod, this one (whose status still shows
	// the death) among them, before it sees the next: once the next death
	// is on record, this one has been looked at again.
	next := create(t, nil, busyRunner(ns, "next"))
	setStatus(t, next, podtest.Runner(ns, "next").Terminated("runner", 4, "Error").Obj().Status)
	require.Eventually(t, func() bool { return len(deathsOf(t, next)) == 1 }, patience, 200*time.Millisecond, "the new leader records")
	caughtUp(t)
	recs := deathsOf(t, pod)
	require.Len(t, recs, 1, "not recorded twice")
	assert.Equal(t, r, recs[0])
	assert.Empty(t, diedEvents(t, pod), "nor notified twice")
	assert.Contains(t, runWhy(t, "lasting", "-n", ns), `runner "runner" died: error-exit`)
}

func TestForgedEventsAndReviewsChangeNothingWhyPrints(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, busyRunner(ns, "target"))
	before := runWhy(t, "target", "-n", ns)
	// Anyone with events create can write a RunnerDied Event...
	forged := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "target.forged"}, EventTime: metav1.NowMicro(),
		Regarding:           corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: "target", UID: pod.UID},
		ReportingController: "runnerguard.io/runnerguard", ReportingInstance: "x", Action: "Died", Type: corev1.EventTypeNormal,
		Reason: death.ReasonDied, Note: `runner "runner" died: clean-exit`}
	require.NoError(t, admin.Create(context.Background(), forged))
	// ...and anyone on the pod network can post a review: a delete by a
	// made-up requester of a pod with a made-up UID.
	fake := pod.DeepCopy()
	fake.UID = "00000000-0000-0000-0000-000000000000"
	fake.Annotations = map[string]string{runnerpod.AllowDelete: "forged"}
	resp := askGuard(t, deleteReview(t, fake, "mallory"))
	assert.True(t, resp.Allowed, "the forged review's own pod would be allowed")
	// The guard's work after the answer is done once it says so.
	logged(t, "no metric, Event or note: the pod does not exist with the review's UID, or its deletion had begun", "uid", string(fake.UID))
	assert.Empty(t, deletionNotes(t, ns), "but nothing is noted for a pod that does not exist with that UID")
	assert.Equal(t, before, runWhy(t, "target", "-n", ns), "why prints what it did before")
	assert.NotContains(t, runWhy(t, "target", "-n", ns, "-o", "json"), "clean-exit")
}

func deletionNotes(t *testing.T, ns string) []v1alpha1.RunnerDeletion {
	t.Helper()
	list := &v1alpha1.RunnerDeletionList{}
	require.NoError(t, admin.List(context.Background(), list, client.InNamespace(ns)))
	return list.Items
}

func TestRetentionKeepsTheNewestRecordsOfANamespaceAndThoseOfPodsStillThere(t *testing.T) {
	ns := newNamespace(t, nil)
	var pods []*corev1.Pod
	for i := range 5 {
		name := fmt.Sprintf("r-%d", i)
		pod := create(t, nil, busyRunner(ns, name))
		setStatus(t, pod, podtest.Runner(ns, name).Terminated("runner", 1, "Error").Obj().Status)
		eventually(t, func() bool { return len(deathsOf(t, pod)) == 1 }, "recorded")
		pods = append(pods, pod)
	}
	// The suite keeps suiteCfg.Records.MaxPerNamespace records a namespace,
	// but not at the cost of a pod that still shows its death (a leader
	// would write its record again): the oldest pod stays, the others go.
	for _, pod := range pods[1:] {
		require.NoError(t, deletePod(admin, pod, client.GracePeriodSeconds(0))) // no kubelet here to finish it
	}
	require.Eventually(t, func() bool {
		list := &v1alpha1.RunnerDeathList{}
		require.NoError(t, admin.List(context.Background(), list, client.InNamespace(ns)))
		return len(list.Items) == suiteCfg.Records.MaxPerNamespace
		// Retention spares the records of pods removed within two of the
		// gap buffer's holds (recorder.Gap), which a new leader may plan
		// again: the collector removes them only after that.
	}, 2*time.Minute, 200*time.Millisecond, "the leader collects the oldest of pods that are gone")
	for i, pod := range pods {
		want := 0
		if i == 0 || i >= len(pods)-(suiteCfg.Records.MaxPerNamespace-1) {
			want = 1
		}
		assert.Len(t, deathsOf(t, pod), want, pod.Name)
	}
}

// TestShortLivedPodsCannotPushAnAbnormalRecordOutOfRetention plays class 6
// of the security model as the attacker would: a job's own ServiceAccount
// (granted edit, as CI jobs often are) creates pods a preset matches that
// end at once, cleanly, more of them than the namespace's count, and
// leaves them in place, so that their records are spared while the pod of
// an older failed runner is gone. The failed runner's record stays; so do
// the short pods' records, the namespace over the count until their pods
// go. A clean record of a pod that is gone (bait) is what the count takes,
// and its removal shows the collector has judged the namespace.
func TestShortLivedPodsCannotPushAnAbnormalRecordOutOfRetention(t *testing.T) {
	ns := newNamespace(t, nil)
	end := func(c client.Client, name string, code int32, reason string) *corev1.Pod {
		pod := create(t, c, busyRunner(ns, name))
		setStatus(t, pod, podtest.Runner(ns, name).Terminated("runner", code, reason).Obj().Status)
		eventually(t, func() bool { return len(deathsOf(t, pod)) == 1 }, name+" recorded")
		return pod
	}
	failed := end(nil, "failed", 1, "Error")
	job := may(t, ns, serviceAccount("system:serviceaccount:"+ns+":job"), "edit").client(t)
	bait := end(job, "bait", 0, "Completed")
	var short []*corev1.Pod
	for i := range suiteCfg.Records.MaxPerNamespace + 1 {
		short = append(short, end(job, fmt.Sprintf("short-%d", i), 0, "Completed"))
	}
	for _, pod := range []*corev1.Pod{failed, bait} {
		require.NoError(t, deletePod(admin, pod, client.GracePeriodSeconds(0))) // no kubelet here to finish it
	}
	require.Eventually(t, func() bool {
		return len(deathsOf(t, bait)) == 0
		// The records of pods removed lately are spared a while (as
		// above): the bait's and the failed runner's alike.
	}, 2*time.Minute, 200*time.Millisecond, "the leader collects the clean record of a pod that is gone")
	recs := deathsOf(t, failed)
	require.Len(t, recs, 1, "the failed runner's record, the oldest, is kept")
	assert.Equal(t, string(death.ErrorExit), recs[0].Class)
	for _, pod := range short {
		assert.Len(t, deathsOf(t, pod), 1, "%s: its pod still shows it, so it is kept", pod.Name)
	}
}

func TestAStuckRunnerGetsOneWarning(t *testing.T) {
	ns := newNamespace(t, nil)
	w := podtest.Runner(ns, "stuck").Waiting("runner", "ErrImagePull")
	w.Status.ContainerStatuses[0].State.Waiting.Message = "failed to pull image: 401 Unauthorized"
	pod := create(t, nil, w.Obj())
	eventually(t, func() bool {
		return slices.ContainsFunc(podEvents(t, pod), func(e eventsv1.Event) bool {
			return e.Reason == death.ReasonStuck && e.Type == corev1.EventTypeWarning
		})
	}, "a runner waiting past --stuck-after (3s here) is reported")
	// A write of the pod has the watcher look at it again now, rather
	// than at its next check (a delay caughtUp does not wait for).
	touch(t, pod)
	caughtUp(t)
	n := 0
	for _, e := range podEvents(t, pod) {
		if e.Reason == death.ReasonStuck {
			n++
			assert.Contains(t, e.Note, "ErrImagePull: failed to pull image: 401 Unauthorized")
		}
	}
	assert.Equal(t, 1, n)
}

func TestWhyTellsHowAGonePodsRunnerDied(t *testing.T) {
	ns := newNamespace(t, nil)
	final := `{"v":1,"ts":"2026-11-22T10:00:00Z","cg":"v2","oom":1,"oom_kill":1,"peak":268435456,"limit":268435456}`
	w := podtest.Runner(ns, "oom-gone").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final)
	pod := create(t, nil, w.Obj())
	oneDeath(t, pod)
	forceRemove(pod)
	require.Eventually(t, func() bool { return !alive(t, pod) }, patience, 100*time.Millisecond)

	out := runWhy(t, "oom-gone", "-n", ns)
	t.Logf("runnerguard why oom-gone:\n%s", out)
	for _, want := range []string{`runner "runner" died: cgroup-oom`, "exit code 137, signal 9, reason OOMKilled", "peak 256Mi of 256Mi limit, oom 1, oom_kill 1", "the vitals confirm an OOM kill"} {
		assert.Contains(t, out, want)
	}
	var list v1alpha1.RunnerDeathList
	require.NoError(t, json.Unmarshal([]byte(runWhy(t, "-n", ns, "oom-gone", "-o", "json")), &list))
	require.Len(t, list.Items, 1)
	assert.Equal(t, string(death.CgroupOOM), list.Items[0].Record.Class)

	assert.Contains(t, runWhy(t, "never-was", "-n", ns), "is gone and no runnerguard record of it remains")
}

// runWhy runs runnerguard why as an operator would, with the admin's
// kubeconfig: its report, printed whether a death is known (exit 0) or not
// (exit 3).
func runWhy(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := runCLI(t, nil, append([]string{"why", "--kubeconfig", adminKubeconfig}, args...)...)
	require.Contains(t, []int{0, 3}, code, errOut)
	return out
}
