//go:build e2e

package api

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Each fleet's whole job lifecycle, each step played by the principal that
// plays it: the fleet's own requests are never refused in a normal life
// (every one must succeed on its first try), and each runner's death is on
// record once, with its class and whoever started it.

const (
	// arcListener writes the job it assigned into the EphemeralRunner.
	arcListener = "system:serviceaccount:arc-systems:arc-runner-set-listener"
	// clusterAdmin deletes an EphemeralRunner by hand: the third party.
	clusterAdmin = "alice@example.com"
	// arcFinalizer is ARC's other finalizer, removed last.
	arcFinalizer = "ephemeralrunner.actions.github.com/finalizer"
)

// arcRunner is an ARC scale-set runner: its EphemeralRunner, with ARC's two
// finalizers as its controller adds them, and its pod, whose runner has run
// for a minute.
type arcRunner struct {
	er  *unstructured.Unstructured
	pod *corev1.Pod
}

func newARCRunner(t *testing.T, ns, name string) arcRunner {
	t.Helper()
	ctx := context.Background()
	er := apitest.EphemeralRunner(ns, name)
	er.SetFinalizers([]string{arcscaleset.RegistrationFinalizer, arcFinalizer})
	require.NoError(t, as(t, arcController).Create(ctx, er))
	t.Cleanup(func() {
		_ = admin.Patch(ctx, er.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	w := podtest.ARCScaleSet(ns, name).RunningSince("runner", time.Now().Add(-time.Minute))
	w.OwnerReferences[0].UID = er.GetUID()
	return arcRunner{er: er, pod: create(t, as(t, arcController), w.Obj())}
}

// assignJob is the listener writing the job it assigned.
func (r arcRunner) assignJob(t *testing.T) {
	t.Helper()
	patch := []byte(`{"status":{"jobRequestId":7,"jobId":"job-7"}}`)
	require.NoError(t, as(t, arcListener).Status().Patch(context.Background(), r.er.DeepCopy(), client.RawPatch(types.MergePatchType, patch)))
}

// removeFinalizer is ARC's controller removing one of its finalizers: the
// registration finalizer once the service accepted RemoveRunner, the other
// once the pod is deleted.
func (r arcRunner) removeFinalizer(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	got := r.er.DeepCopy()
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(got), got))
	var keep []string
	for _, f := range got.GetFinalizers() {
		if f != name {
			keep = append(keep, f)
		}
	}
	got.SetFinalizers(keep)
	require.NoError(t, as(t, arcController).Update(ctx, got))
}

// deleteEphemeralRunner deletes it as user and waits for the guard's note.
func (r arcRunner) deleteEphemeralRunner(t *testing.T, user string) {
	t.Helper()
	require.NoError(t, as(t, user).Delete(context.Background(), r.er.DeepCopy()), "an EphemeralRunner's deletion is never refused")
	eventually(t, func() bool { return ephemeralRunnerNote(t, r) == user }, "the guard's note of who deleted the EphemeralRunner")
}

func ephemeralRunnerNote(t *testing.T, r arcRunner) string {
	t.Helper()
	n := &v1alpha1.RunnerDeletion{}
	err := admin.Get(context.Background(), client.ObjectKey{Namespace: r.er.GetNamespace(), Name: string(r.er.GetUID())}, n)
	if apierrors.IsNotFound(err) {
		return ""
	}
	require.NoError(t, err)
	return n.Deletion.Requester
}

// kubeletEnds is the kubelet ending the runner after a graceful delete
// (exit as given) and removing the pod.
func kubeletEnds(t *testing.T, pod *corev1.Pod, w *podtest.Wrapper) {
	t.Helper()
	st := w.Obj().Status
	for i := range st.ContainerStatuses {
		if term := st.ContainerStatuses[i].State.Terminated; term != nil {
			term.StartedAt.Time, term.FinishedAt.Time = time.Now().Add(-time.Minute), time.Now()
		}
	}
	setStatus(t, pod, st)
}

// refusals are the DeleteRefused Events on pod.
func refusals(t *testing.T, pod *corev1.Pod) []eventsv1.Event {
	return eventsWith(t, pod, "DeleteRefused")
}

func TestARCScaleSetLifeWhereSomeoneElseDeletesABusyRunnersEphemeralRunner(t *testing.T) {
	ns := newNamespace(t, nil)
	r := newARCRunner(t, ns, "arc-busy")
	r.assignJob(t)

	r.deleteEphemeralRunner(t, clusterAdmin)
	// The service answers JobStillRunning: ARC keeps its registration
	// finalizer and leaves the pod. Anyone deleting the pod meanwhile is
	// refused, and told who deleted the EphemeralRunner.
	err := deletePod(as(t, reaper), r.pod)
	require.True(t, apierrors.IsForbidden(err), "the job still runs: %v", err)
	eventually(t, hasEvent(t, r.pod, corev1.EventTypeWarning, "DeleteRefused", "its EphemeralRunner is being deleted, requested by "+clusterAdmin),
		"the refusal names who deleted the EphemeralRunner")

	// The job completes; the service accepts RemoveRunner; ARC removes the
	// finalizer and deletes the pod while the runner lingers.
	r.removeFinalizer(t, arcscaleset.RegistrationFinalizer)
	require.NoError(t, deletePod(as(t, arcController), r.pod), "ARC's delete once the job is over passes")
	kubeletEnds(t, r.pod, podtest.ARCScaleSet(ns, "arc-busy").Terminated("runner", 143, "Error"))
	r.removeFinalizer(t, arcFinalizer)

	rec := oneDeath(t, r.pod)
	assert.Equal(t, string(death.JobEnded), rec.Class, "a runner shutting down after its job is the job's normal end")
	assert.Equal(t, arcController, rec.DeletedBy)
	assert.Equal(t, "job-over", rec.DeleteRule)
	assert.Equal(t, clusterAdmin, rec.StartedBy, "the record names who started it")
	require.NotNil(t, rec.Job, "the record names the job, the EphemeralRunner gone or not")
	assert.Equal(t, "job-7", rec.Job.ID)
	for _, e := range refusals(t, r.pod) {
		assert.NotContains(t, e.Note, "by "+arcController, "ARC itself is never refused")
	}
}

func TestARCScaleSetLifeWithAForceDeleteAfterTheJob(t *testing.T) {
	ns := newNamespace(t, nil)
	r := newARCRunner(t, ns, "arc-grace0")
	r.assignJob(t)
	r.deleteEphemeralRunner(t, clusterAdmin)
	r.removeFinalizer(t, arcscaleset.RegistrationFinalizer)
	require.NoError(t, deletePod(as(t, arcController), r.pod, client.GracePeriodSeconds(0)), "a grace-0 delete after the job passes")
	r.removeFinalizer(t, arcFinalizer)

	rec := oneDeath(t, r.pod)
	assert.Equal(t, string(death.JobEnded), rec.Class)
	assert.Nil(t, rec.ExitCode, "removed at once: no terminated state came")
	assert.Equal(t, arcController, rec.DeletedBy)
	assert.Equal(t, clusterAdmin, rec.StartedBy)
	assert.Empty(t, refusals(t, r.pod))
}

func TestARCScaleSetLifeWithACleanExit(t *testing.T) {
	// ARC's main branch (0.15): on a clean exit its controller deletes the
	// EphemeralRunner at once, then the pod of the ended runner.
	ns := newNamespace(t, nil)
	r := newARCRunner(t, ns, "arc-clean")
	r.assignJob(t)
	setStatus(t, r.pod, podtest.ARCScaleSet(ns, "arc-clean").Terminated("runner", 0, "Completed").Phase(corev1.PodSucceeded).Obj().Status)
	r.deleteEphemeralRunner(t, arcController)
	r.removeFinalizer(t, arcscaleset.RegistrationFinalizer)
	require.NoError(t, deletePod(as(t, arcController), r.pod))
	r.removeFinalizer(t, arcFinalizer)

	rec := oneDeath(t, r.pod)
	assert.Equal(t, string(death.CleanExit), rec.Class)
	assert.Empty(t, rec.DeletedBy, "an ended runner's cleanup is never reviewed")
	assert.Empty(t, refusals(t, r.pod))
}

func TestARCScaleSetLifeWithAnOOM(t *testing.T) {
	ns := newNamespace(t, nil)
	r := newARCRunner(t, ns, "arc-oom")
	r.assignJob(t)
	setStatus(t, r.pod, podtest.ARCScaleSet(ns, "arc-oom").Terminated("runner", 137, "OOMKilled").Phase(corev1.PodFailed).Obj().Status)
	// A failed runner with a job: ARC deletes the EphemeralRunner, then the pod.
	r.deleteEphemeralRunner(t, arcController)
	r.removeFinalizer(t, arcscaleset.RegistrationFinalizer)
	require.NoError(t, deletePod(as(t, arcController), r.pod))
	r.removeFinalizer(t, arcFinalizer)

	rec := oneDeath(t, r.pod)
	assert.Equal(t, string(death.CgroupOOM), rec.Class)
	assert.Empty(t, refusals(t, r.pod))
}

func TestARCScaleSetScaleDownOfAnIdleRunner(t *testing.T) {
	ns := newNamespace(t, nil)
	r := newARCRunner(t, ns, "arc-idle")
	r.deleteEphemeralRunner(t, arcController)
	r.removeFinalizer(t, arcscaleset.RegistrationFinalizer)
	require.NoError(t, deletePod(as(t, arcController), r.pod))
	kubeletEnds(t, r.pod, podtest.ARCScaleSet(ns, "arc-idle").Terminated("runner", 143, "Error"))
	r.removeFinalizer(t, arcFinalizer)

	// Its EphemeralRunner never named a job: neither a death nor a job's
	// end (this once read job-ended, "the job ran").
	rec := oneDeath(t, r.pod)
	assert.Equal(t, "idle", rec.DeleteRule, "the runner never had a job")
	assert.Equal(t, string(death.IdleRemoved), rec.Class)
	assert.Equal(t, arcController, rec.DeletedBy)
	assert.Equal(t, arcController, rec.StartedBy)
	assert.Nil(t, rec.Job)
	assert.Empty(t, refusals(t, r.pod))
	eventually(t, hasEvent(t, r.pod, corev1.EventTypeNormal, death.ReasonIdleRemoved, "removed by its fleet while idle"), "a Normal Event says so")
}

// ARC's delete after a job whose EphemeralRunner ARC has already removed
// (its finalizers gone) before the runner's end is reported: the record
// still names the job, as the guard's note kept it.
func TestARCScaleSetRecordNamesTheJobAfterTheEphemeralRunnerIsGone(t *testing.T) {
	ns := newNamespace(t, nil)
	r := newARCRunner(t, ns, "arc-gone")
	r.assignJob(t)
	eventually(t, func() bool {
		got := &corev1.Pod{}
		return admin.Get(context.Background(), client.ObjectKeyFromObject(r.pod), got) == nil && got.Annotations[runnerpod.JobAssignedAt] != ""
	}, "the leader writes when it saw the job begin")
	r.deleteEphemeralRunner(t, arcController)
	r.removeFinalizer(t, arcscaleset.RegistrationFinalizer)
	require.NoError(t, deletePod(as(t, arcController), r.pod))
	r.removeFinalizer(t, arcFinalizer)
	eventually(t, func() bool {
		return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(r.er), r.er.DeepCopy()))
	}, "ARC's EphemeralRunner is gone")
	kubeletEnds(t, r.pod, podtest.ARCScaleSet(ns, "arc-gone").Terminated("runner", 143, "Error"))

	rec := oneDeath(t, r.pod)
	assert.Equal(t, string(death.JobEnded), rec.Class)
	require.NotNil(t, rec.Job)
	assert.Equal(t, "job-7", rec.Job.ID)
	assert.Equal(t, "7", rec.Job.RequestID)
	require.NotNil(t, rec.JobStartedAt, "the job's start, apart from the runner's")
	assert.True(t, rec.JobStartedAt.After(rec.StartedAt.Time), "the runner waited for its job")
}

func TestLegacyARCLife(t *testing.T) {
	legacy := as(t, arclegacy.Controller)
	// Each runner in a namespace of its own: the suite keeps few records
	// a namespace.
	running := func(name string) *corev1.Pod {
		w := podtest.ARCLegacy(newNamespace(t, nil), name).RunningSince("runner", time.Now().Add(-time.Minute))
		return create(t, legacy, w.Obj())
	}

	// A job ends: the ephemeral runner exits 0 and the controller removes
	// its pod.
	done := running("legacy-done")
	setStatus(t, done, podtest.ARCLegacy(done.Namespace, done.Name).Terminated("runner", 0, "Completed").Phase(corev1.PodSucceeded).Obj().Status)
	require.NoError(t, deletePod(legacy, done))
	assert.Equal(t, string(death.CleanExit), oneDeath(t, done).Class)

	// Scale-down: unregistered first, then deleted.
	idle := running("legacy-idle")
	require.NoError(t, patchMeta(legacy, idle, annotations(arclegacy.Unregistered, time.Now().UTC().Format(time.RFC3339))))
	require.NoError(t, deletePod(legacy, idle))
	kubeletEnds(t, idle, podtest.ARCLegacy(idle.Namespace, idle.Name).Terminated("runner", 143, "Error"))
	rec := oneDeath(t, idle)
	assert.Equal(t, arclegacy.Controller, rec.DeletedBy)
	assert.Equal(t, "idle", rec.DeleteRule)
	assert.Equal(t, string(death.IdleRemoved), rec.Class, "an unregistered runner its controller removed: no death, no job's end")

	// An OOM: the controller removes the failed pod.
	oom := running("legacy-oom")
	setStatus(t, oom, podtest.ARCLegacy(oom.Namespace, oom.Name).Terminated("runner", 137, "OOMKilled").Phase(corev1.PodFailed).Obj().Status)
	require.NoError(t, deletePod(legacy, oom))
	assert.Equal(t, string(death.CgroupOOM), oneDeath(t, oom).Class)

	for _, p := range []*corev1.Pod{done, idle, oom} {
		assert.Empty(t, refusals(t, p), p.Name)
	}
}

func TestGitLabLifeWithTheInjector(t *testing.T) {
	ns := newNamespace(t, nil)
	// The manager in a namespace of its own, the layout where its name is
	// one edit in the build pods' namespace cannot wear.
	manager := "system:serviceaccount:gitlab-runner:gitlab-runner"
	job := func(name string) *corev1.Pod {
		w := podtest.GitLab(ns, name).RunningSince("build", time.Now().Add(-time.Minute))
		pod := create(t, as(t, manager), w.Obj())
		require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), pod))
		require.Equal(t, manager, pod.Annotations[runnerpod.CreatedBy], "the injector records the creator")
		return pod
	}

	done := job("runner-a-project-1-concurrent-0")
	require.True(t, apierrors.IsForbidden(deletePod(as(t, reaper), done)), "a stranger may not end the job")
	require.NoError(t, deletePod(as(t, manager), done), "the manager ends the job it created")
	kubeletEnds(t, done, podtest.GitLab(ns, done.Name).Terminated("build", 137, "Error"))
	rec := oneDeath(t, done)
	assert.Equal(t, string(death.JobEnded), rec.Class)
	assert.Equal(t, manager, rec.DeletedBy)

	oom := job("runner-a-project-1-concurrent-1")
	setStatus(t, oom, podtest.GitLab(ns, oom.Name).Terminated("build", 137, "OOMKilled").Obj().Status)
	require.NoError(t, deletePod(as(t, manager), oom))
	assert.Equal(t, string(death.CgroupOOM), oneDeath(t, oom).Class)

	// GitLab's timeout: the manager deletes the pod a second or two before
	// the pod's own deadline (activeDeadlineSeconds, the job's timeout).
	start := time.Now().Add(-time.Minute)
	tw := podtest.GitLab(ns, "runner-a-project-1-concurrent-2").ActiveDeadline(62, start).RunningSince("build", start)
	timedOut := create(t, as(t, manager), tw.Obj())
	require.NoError(t, deletePod(as(t, manager), timedOut), "the manager ends the job at its timeout")
	kubeletEnds(t, timedOut, podtest.GitLab(ns, timedOut.Name).ActiveDeadline(62, start).Terminated("build", 137, "Error"))
	rec = oneDeath(t, timedOut)
	assert.Equal(t, string(death.JobTimeout), rec.Class, "the job's timeout, though its owner's delete beat the deadline")
	assert.Contains(t, rec.ClassBasis, "before its deadline (activeDeadlineSeconds 62")

	for _, p := range []*corev1.Pod{done, oom, timedOut} {
		for _, e := range refusals(t, p) {
			assert.NotContains(t, e.Note, "by "+manager, "the manager is never refused")
		}
	}
}

// lateNamespace is a namespace whose pods were created before it opted in,
// as while the injector was down: they carry no created-by.
func lateNamespace(t *testing.T, pods ...*corev1.Pod) []*corev1.Pod {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{}
	ns.GenerateName = "e2e-late-"
	require.NoError(t, admin.Create(ctx, ns))
	t.Cleanup(func() { _ = admin.Delete(ctx, ns) })
	var out []*corev1.Pod
	for _, p := range pods {
		p.Namespace = ns.Name
		out = append(out, create(t, nil, p))
	}
	ns.Labels = map[string]string{runnerpod.EnabledNamespaceLabel: "true"}
	require.NoError(t, admin.Update(ctx, ns))
	probe := create(t, nil, busyRunner(ns.Name, "probe"))
	eventually(t, func() bool { return apierrors.IsForbidden(deletePod(as(t, reaper), probe, client.DryRunAll)) }, "the guard to judge the namespace")
	return out
}

func TestGitLabLifeWithoutTheInjector(t *testing.T) {
	// The suite's gitlab preset names the manager in ownerPrincipals, as
	// the docs say to: its pods that missed the injector stay its own.
	pods := lateNamespace(t,
		podtest.GitLab("", "runner-b-project-2-concurrent-0").RunningSince("build", time.Now().Add(-time.Minute)).Obj(),
		podtest.GitLab("", "runner-b-project-2-concurrent-1").RunningSince("build", time.Now().Add(-time.Minute)).Obj())
	done, oom := pods[0], pods[1]
	require.NotContains(t, done.Annotations, runnerpod.CreatedBy)

	require.True(t, apierrors.IsForbidden(deletePod(as(t, reaper), done)), "a stranger may not end the job")
	require.NoError(t, deletePod(as(t, ownerPrincipal), done), "the configured manager ends it")
	kubeletEnds(t, done, podtest.GitLab(done.Namespace, done.Name).Terminated("build", 137, "Error"))
	rec := oneDeath(t, done)
	assert.Equal(t, string(death.JobEnded), rec.Class)
	assert.Equal(t, ownerPrincipal, rec.DeletedBy)

	setStatus(t, oom, podtest.GitLab(oom.Namespace, oom.Name).Terminated("build", 137, "OOMKilled").Obj().Status)
	require.NoError(t, deletePod(as(t, ownerPrincipal), oom))
	assert.Equal(t, string(death.CgroupOOM), oneDeath(t, oom).Class)
}

// The suite names no owner principals for ARC's workflow pods: one created
// while the injector was down (or made to miss it) has no recorded owner.
// Its runner, with its own pod's token, still ends it at the job's end
// (ARC's hooks do not retry a refused delete), with a Warning naming it; a
// reaper with edit, as itself, as the runner's ServiceAccount or with its
// own pod's token, is refused.
func TestAJobPodWithNoRecordedOwnerIsEndedByItsRunnerAndNoReaper(t *testing.T) {
	const kubeMode = "arc-runner-kube-mode"
	pod := lateNamespace(t, podtest.ARCWorkflow("", "arc-busy").RunningSince("job", time.Now().Add(-time.Minute)).Obj())[0]
	ns := pod.Namespace
	require.NotContains(t, pod.Annotations, runnerpod.CreatedBy)
	runnerSA := serviceAccountIn(t, ns, kubeMode)
	may(t, ns, serviceAccount(runnerSA), "edit")
	reaperSA := serviceAccountIn(t, ns, "orphan-reaper")
	may(t, ns, serviceAccount(reaperSA), "edit")
	reaperID := token(t, cs, ns, "orphan-reaper", nil)
	reaperPod := runnerPod(t, ns, "orphan-reaper-0", "orphan-reaper")
	runner := token(t, cs, ns, kubeMode, runnerPod(t, ns, "arc-busy", kubeMode))

	for name, id := range map[string]identity{
		"a reaper with edit":                           reaperID,
		"a reaper wearing the runner's ServiceAccount": reaperID.wearing(runnerSA),
		"a reaper with its own pod's token":            token(t, cs, ns, "orphan-reaper", reaperPod),
	} {
		err := deletePod(id.client(t), pod)
		require.Error(t, err, name)
		assert.True(t, apierrors.IsForbidden(err), "%s: %v", name, err)
		assert.Contains(t, err.Error(), `only a token bound to the runner pod it names ("arc-busy"`, name)
		err = connectAs(t, id.cfg, pod, "exec", "job")
		assert.True(t, apierrors.IsForbidden(err), "%s's exec: %v", name, err)
	}
	assert.True(t, alive(t, pod))

	require.NoError(t, deletePod(runner.client(t), pod, client.GracePeriodSeconds(0)))
	eventually(t, hasEvent(t, pod, corev1.EventTypeWarning, "JobOwnerUnknown", `bound to the runner pod "arc-busy" the workflow pod names`), "a Warning names who ended it")
	rec := oneDeath(t, pod)
	assert.Equal(t, runnerSA, rec.DeletedBy)
	assert.Equal(t, "owner-unknown", rec.DeleteRule)
}

func TestAPodsProtectionEndsAtItsOwnDeadline(t *testing.T) {
	ns := newNamespace(t, nil)
	job := func(name string, started time.Time) *corev1.Pod {
		w := podtest.GitLab(ns, name).RunningSince("build", started).ActiveDeadline(601, started)
		return create(t, as(t, ownerPrincipal), w.Obj())
	}
	young := job("runner-c-project-3-concurrent-0", time.Now().Add(-time.Minute))
	err := deletePod(as(t, reaper), young, client.DryRunAll)
	require.True(t, apierrors.IsForbidden(err))
	assert.Contains(t, err.Error(), "(the pod's activeDeadlineSeconds 601)", "the refusal says when the protection ends")

	old := job("runner-c-project-3-concurrent-1", time.Now().Add(-11*time.Minute))
	require.NoError(t, deletePod(as(t, reaper), old), "past its deadline the job cannot run on")
	eventually(t, hasEvent(t, old, corev1.EventTypeWarning, "ProtectionExpired", "activeDeadlineSeconds 601"), "a Warning Event says the protection expired")
}

// ARC 0.14 on a clean exit: its controller deletes the EphemeralRunner at
// once and is done with it before the runner's end is reported; ARC's
// delete of the ended pod is never reviewed. The record still names the
// job, as the guard's note of the EphemeralRunner's deletion kept it.
func TestARCScaleSetCleanExitRecordNamesTheJobAfterTheEphemeralRunnerIsGone(t *testing.T) {
	ns := newNamespace(t, nil)
	r := newARCRunner(t, ns, "arc-clean-gone")
	r.assignJob(t)
	r.deleteEphemeralRunner(t, arcController)
	r.removeFinalizer(t, arcscaleset.RegistrationFinalizer)
	r.removeFinalizer(t, arcFinalizer)
	eventually(t, func() bool {
		return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(r.er), r.er.DeepCopy()))
	}, "ARC's EphemeralRunner is gone")
	setStatus(t, r.pod, podtest.ARCScaleSet(ns, "arc-clean-gone").Terminated("runner", 0, "Completed").Phase(corev1.PodSucceeded).Obj().Status)
	require.NoError(t, deletePod(as(t, arcController), r.pod))

	rec := oneDeath(t, r.pod)
	assert.Equal(t, string(death.CleanExit), rec.Class)
	assert.Empty(t, rec.DeletedBy, "an ended runner's cleanup is never reviewed")
	require.NotNil(t, rec.Job, "the job named though its EphemeralRunner is gone")
	assert.Equal(t, "job-7", rec.Job.ID)
	assert.Equal(t, "7", rec.Job.RequestID)
}

// The registration finalizer's removal from a deleting EphemeralRunner says
// the runner's job is over: only ARC's controller (named in
// controllerPrincipals), the garbage collector and cluster admins may
// remove it, so a principal with the listener's rights cannot make a busy
// runner's delete pass as the job's end.
func TestOnlyARCsControllerSaysAJobIsOverThroughItsEphemeralRunner(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	listener := serviceAccount(arcListener)
	grant(t, ns, listener, ephemeralRunnerWriter, authorizationv1.ResourceAttributes{Verb: "update", Group: "actions.github.com", Resource: "ephemeralrunners"})
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	r := newARCRunner(t, ns, "arc-held")
	r.assignJob(t)
	require.NoError(t, as(t, arcController).Delete(ctx, r.er.DeepCopy()), "ARC deletes the EphemeralRunner; its finalizers hold it")

	got := r.er.DeepCopy()
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(got), got))
	got.SetFinalizers([]string{arcFinalizer})
	err := listener.client(t).Update(ctx, got)
	require.Error(t, err, "the listener's rights do not say the job is over")
	assert.Contains(t, err.Error(), "may remove "+arcscaleset.RegistrationFinalizer)
	err = deletePod(reaperSA.client(t), r.pod)
	assert.True(t, apierrors.IsForbidden(err), "the runner is still busy: %v", err)

	r.removeFinalizer(t, arcscaleset.RegistrationFinalizer)
	require.NoError(t, deletePod(reaperSA.client(t), r.pod), "ARC's controller said so: the job is over")
}
