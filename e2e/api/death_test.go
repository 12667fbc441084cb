//go:build e2e

package api

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// deathsOf reads the RunnerDeath records of pod.
func deathsOf(t *testing.T, pod *corev1.Pod) []death.Record {
	t.Helper()
	list := &v1alpha1.RunnerDeathList{}
	require.NoError(t, admin.List(context.Background(), list, client.InNamespace(pod.Namespace),
		client.MatchingLabels{death.PodUIDLabel: string(pod.UID)}))
	var out []death.Record
	for i := range list.Items {
		out = append(out, death.FromObject(&list.Items[i]))
	}
	return out
}

// oneDeath waits for pod's one death record and returns it, once the
// watcher has done what could write a second (caughtUp).
func oneDeath(t *testing.T, pod *corev1.Pod) death.Record {
	t.Helper()
	eventually(t, func() bool { return len(deathsOf(t, pod)) > 0 }, "a RunnerDeath for "+pod.Name)
	caughtUp(t)
	recs := deathsOf(t, pod)
	require.Len(t, recs, 1, "one death, one record")
	return recs[0]
}

func TestAnOOMKilledRunnerDeletedByTheFleetHasOneRecord(t *testing.T) {
	ns := newNamespace(t, nil)
	final := `{"v":1,"ts":"2026-11-22T10:00:00Z","cg":"v1","oom":1,"oom_kill":1,"peak":67108864,"limit":67108864,"current":1216512}`
	w := podtest.Runner(ns, "oom").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final)
	w.Spec.InitContainers = append(w.Spec.InitContainers, corev1.Container{Name: runnerpod.VitalsContainer, Image: "example.com/vitals:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
	w.Status.Phase = corev1.PodRunning
	pod := create(t, nil, w.Obj())
	require.NoError(t, deletePod(as(t, reaper), pod))
	require.NoError(t, deletePod(as(t, reaper), pod), "a second delete of the terminating pod")
	r := oneDeath(t, pod)
	assert.Equal(t, string(death.CgroupOOM), r.Class)
	require.NotNil(t, r.ExitCode)
	assert.Equal(t, int32(137), *r.ExitCode)
	assert.Equal(t, int32(9), r.Signal)
	assert.Equal(t, "OOMKilled", r.Reason)
	assert.Empty(t, r.DeletedBy, "the runner had died before the delete, which the guard never reviews")
	assert.Equal(t, "node-e2e", r.Node)
	assert.Equal(t, ptr.To(true), r.OOMConfirmed)
	require.NotNil(t, r.Vitals)
	assert.Equal(t, int64(1), r.Vitals.OOMKill)
}

func TestASucceededRunnerPodHasACleanExitRecord(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, podtest.Runner(ns, "done").Terminated("runner", 0, "Completed").Phase(corev1.PodSucceeded).Obj())
	require.NoError(t, deletePod(as(t, reaper), pod))
	assert.Equal(t, string(death.CleanExit), oneDeath(t, pod).Class)
}

func TestAForceDeleteOfARunningRunnerIsRecordedAsDeletedRunningWithItsDeleter(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := busyRunner(ns, "forced")
	pod.Annotations = map[string]string{runnerpod.AllowDelete: "stuck node"}
	pod = create(t, nil, pod)
	require.NoError(t, deletePod(as(t, reaper), pod, client.GracePeriodSeconds(0)))
	r := oneDeath(t, pod)
	assert.Equal(t, string(death.DeletedRunning), r.Class)
	assert.Equal(t, reaper, r.DeletedBy)
	assert.Equal(t, "override", r.DeleteRule)
	assert.Nil(t, r.ExitCode)
}

func TestARunnerPodCreatedWithoutTheInjectorIsStillRecordedWhenDeletedAtOnce(t *testing.T) {
	// Created before its namespace opted in, as while the injector was
	// down: no runner label, so not in the watcher's cache. The guard labels
	// it as it lets the deletion through, before the leader's labeler
	// (every minute) would have.
	ns := &corev1.Namespace{}
	ns.GenerateName = "e2e-late-"
	require.NoError(t, admin.Create(context.Background(), ns))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
	pod := create(t, nil, busyRunner(ns.Name, "unlabelled"))
	ns.Labels = map[string]string{runnerpod.EnabledNamespaceLabel: "true"}
	require.NoError(t, admin.Update(context.Background(), ns))
	// Once the API server sends the namespace's reviews to the guard (a
	// dry run is judged alike), a drain's override lets the delete through.
	eventually(t, func() bool { return apierrors.IsForbidden(deletePod(as(t, reaper), pod, client.DryRunAll)) }, "the guard to judge the namespace")
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), pod))
	require.NotContains(t, pod.Labels, runnerpod.RunnerLabel, "the injector never saw it and the labeler has not passed")
	pod.Annotations = map[string]string{runnerpod.AllowDelete: "stuck node"}
	require.NoError(t, admin.Update(context.Background(), pod))
	require.NoError(t, deletePod(as(t, reaper), pod, client.GracePeriodSeconds(0)))
	r := oneDeath(t, pod)
	assert.Equal(t, string(death.DeletedRunning), r.Class)
	assert.Equal(t, reaper, r.DeletedBy)
}

func TestGitLabsManagerEndingItsJobIsNotADeath(t *testing.T) {
	ns := newNamespace(t, nil)
	manager := as(t, ownerPrincipal)
	w := podtest.GitLab(ns, "job-1").Running("build")
	w.Status.ContainerStatuses[0].State.Running.StartedAt.Time = time.Now().Add(-time.Minute)
	pod := create(t, manager, w.Obj())
	require.NoError(t, deletePod(manager, pod), "the job's owner ends its job")
	// The build shell ignores SIGTERM: the kubelet kills it after the grace.
	st := podtest.GitLab(ns, "job-1").Terminated("build", 137, "Error").Obj().Status
	st.ContainerStatuses[0].State.Terminated.StartedAt.Time = time.Now().Add(-time.Minute)
	st.ContainerStatuses[0].State.Terminated.FinishedAt.Time = time.Now()
	setStatus(t, pod, st)
	r := oneDeath(t, pod)
	assert.Equal(t, string(death.JobEnded), r.Class)
	assert.Equal(t, ownerPrincipal, r.DeletedBy)
	assert.Equal(t, "job-owner", r.DeleteRule)
	require.NotNil(t, r.DeletedAt, "when the owner ended the job")
	why := runWhy(t, "-n", ns, pod.Name)
	assert.Contains(t, why, "when its owner deleted the pod to end it")
	assert.Contains(t, why, "exit code 137 is the owner's stop of the container at the end, not the job's result")
}

// What a record costs in etcd: the object as the API server stores it (JSON,
// managed fields included), for the retention figures in docs/concepts/death-record.md.
func TestTheRecordsFootprint(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := busyRunner(ns, "runner-7x2k9")
	pod.Annotations = map[string]string{runnerpod.AllowDelete: "node rotation"}
	pod = create(t, nil, pod)
	require.NoError(t, deletePod(as(t, reaper), pod))
	// The sidecar's final reading with the runner's own cgroup and the
	// sidecar's, and the runner's last words at the record's bound.
	final := `{"v":1,"ts":"2026-11-22T10:00:00Z","cg":"v2","oom":3,"oom_kill":1,"peak":2147483648,"limit":2147483648,"current":1216512,` +
		`"oom_kill_at":"2026-11-22T09:59:59.75Z","containers":{"runner-1":{"peak":2080374784,"limit":2080374784,"oom":3,"oom_kill":1,"oom_kill_at":"2026-11-22T09:59:59.75Z"},` +
		`"runnerguard-vitals-1":{"peak":9437184,"limit":33554432,"oom":0,"oom_kill":0}}}`
	st := podtest.Runner(ns, pod.Name).Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final).Obj().Status
	st.ContainerStatuses[0].State.Terminated.Message = strings.Repeat("[WORKER 2026-11-22 09:59:59Z INFO StepsRunner] Processing step: make test\n", 60)
	st.ContainerStatuses[0].State.Terminated.StartedAt.Time = time.Now().Add(-time.Hour)
	st.ContainerStatuses[0].State.Terminated.FinishedAt.Time = time.Now()
	setStatus(t, pod, st)
	r := oneDeath(t, pod)
	require.Equal(t, reaper, r.DeletedBy)
	require.Len(t, r.Message, death.MaxMessageBytes, "the last words at their bound")
	require.True(t, r.MessageTruncated)
	require.Equal(t, death.ScopeContainer, r.Vitals.Scope)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("RunnerDeath"))
	require.NoError(t, admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: r.Object().Name}, u))
	b, err := json.Marshal(u.Object)
	require.NoError(t, err)
	perDay, abnormal := 10000, 500 // jobs a day, 5% of them abnormal deaths
	kept := perDay*1 + abnormal*30 // clean kept 24h, abnormal 30 days
	t.Logf("a RunnerDeath is stored as %d bytes of JSON; at the defaults, 10,000 jobs a day keep %d records, %.1f MiB",
		len(b), kept, float64(kept*len(b))/(1<<20))
	assert.Less(t, len(b), 8192, "a record stays small: its last words are bounded at 4 KiB")
}
