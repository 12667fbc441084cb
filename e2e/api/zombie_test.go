//go:build e2e

package api

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/recorder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// zombieReaper is the operator's stuck-runner reaper, named in
// guard.zombieReapers: it may delete a zombie, never a busy runner.
const zombieReaper = "system:serviceaccount:ci-infra:stuck-runner-reaper"

// zombieOf is the zombie the pod carries now, as the leader named it.
func zombieOf(t *testing.T, pod *corev1.Pod) (runnerpod.Zombie, bool) {
	t.Helper()
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	return runnerpod.ZombieOf(got)
}

// spentConfigZombie plays ARC 4588: a runner given a job, its pod gone
// with its spot node, and ARC's new pod for the same EphemeralRunner.
func spentConfigZombie(t *testing.T, ns, name string) (arcRunner, *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	first := newARCRunner(t, ns, name)
	first.assignJob(t)
	// The pod is created in a later second than the job's write, as a
	// re-created pod always is: the API server dates both to the second.
	time.Sleep(1100 * time.Millisecond)
	forceRemove(first.pod) // the spot node went, and its pod with it
	eventually(t, func() bool {
		return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(first.pod), &corev1.Pod{}))
	}, "the first pod is gone")
	w := podtest.ARCScaleSet(ns, name).RunningSince("runner", time.Now())
	w.OwnerReferences[0].UID = first.er.GetUID()
	again := create(t, as(t, arcController), w.Obj())
	return arcRunner{er: first.er, pod: again}, again
}

// ARC re-creates a vanished runner's pod (a spot node's eviction) for the
// same EphemeralRunner, with the one-job configuration the first pod spent
// and the job its status still names (ARC 4588): the new runner is a
// zombie. Played through the API server as ARC's controller and listener
// write it: the leader names it from the EphemeralRunner and the pod alone,
// the guard lets a reaper the operator allows end it, and its record says
// it was a zombie and of which kind.
func TestARCRunnerRecreatedWithASpentConfigIsNamedAZombieLetGoAndRecorded(t *testing.T) {
	ns := newNamespace(t, nil)
	kc := plugin(t)
	_, again := spentConfigZombie(t, ns, "arc-spot")
	eventually(t, func() bool { _, ok := zombieOf(t, again); return ok }, "the leader names the re-created runner a zombie")
	z, _ := zombieOf(t, again)
	assert.Equal(t, arcscaleset.SpentConfig, z.Kind)
	assert.Equal(t, again.CreationTimestamp.Time.UTC(), z.Since, "a zombie since its pod was created")
	eventually(t, hasEvent(t, again, corev1.EventTypeWarning, recorder.ReasonZombie, "a zombie, spent-config since"), "a RunnerZombie Event names it")
	assert.Len(t, eventsWith(t, again, recorder.ReasonZombie), 1, "named once")
	settled := marksSettled(t, again)
	assert.False(t, judgementOf(t, settled).Busy, "its marks no longer hold its node")

	out, _, _ := kc("runnerguard", "why", "arc-spot", "-n", ns)
	assert.Contains(t, out, "it is a zombie, spent-config since "+z.Since.Format(time.RFC3339)+": its EphemeralRunner's job was assigned before this pod was created")

	err := deletePod(as(t, reaper), again)
	require.True(t, apierrors.IsForbidden(err), "a reaper the operator did not allow is refused: %v", err)
	assert.Contains(t, err.Error(), "it is a zombie (spent-config since")
	require.NoError(t, evict(as(t, reaper), again, true), "a zombie's eviction passes for anyone, so its node can go")

	require.NoError(t, deletePod(as(t, zombieReaper), again), "the operator's reaper ends the zombie")
	kubeletEnds(t, again, podtest.ARCScaleSet(ns, "arc-spot").Terminated("runner", 143, "Error"))
	rec := oneDeath(t, again)
	assert.Equal(t, string(death.ZombieEnded), rec.Class)
	assert.Equal(t, string(runnerpod.RuleZombie), rec.DeleteRule)
	assert.Equal(t, zombieReaper, rec.DeletedBy)
	require.NotNil(t, rec.Zombie, "the record names the zombie")
	assert.Equal(t, arcscaleset.SpentConfig, rec.Zombie.Kind)
	assert.Contains(t, rec.ClassBasis, "zombie (spent-config)")
}

// A busy runner whose job is quiet, or was given long after its pod came
// (a job that waited on a slow service), is never taken for a zombie: its
// job was given to it.
func TestABusyARCRunnerWithAQuietJobIsNeverTakenForAZombie(t *testing.T) {
	ns := newNamespace(t, nil)
	r := newARCRunner(t, ns, "arc-quiet")
	time.Sleep(1100 * time.Millisecond) // the job comes in a later second than the pod
	r.assignJob(t)
	eventually(t, func() bool {
		got := &corev1.Pod{}
		return admin.Get(context.Background(), client.ObjectKeyFromObject(r.pod), got) == nil && got.Annotations[runnerpod.JobAssignedAt] != ""
	}, "the leader saw the job begin")
	// The leader has judged the busy record; a quiet spell changes nothing.
	time.Sleep(3 * time.Second)
	_, named := zombieOf(t, r.pod)
	assert.False(t, named, "a runner given its own job is no zombie, however quiet")
	assert.Empty(t, eventsWith(t, r.pod, recorder.ReasonZombie))
	assert.True(t, judgementOf(t, marksSettled(t, r.pod)).Busy)

	for _, user := range []string{reaper, zombieReaper} {
		err := deletePod(as(t, user), r.pod)
		require.True(t, apierrors.IsForbidden(err), "%s is refused a busy runner: %v", user, err)
		assert.NotContains(t, err.Error(), "zombie")
	}
	err := evict(as(t, reaper), r.pod, true)
	require.True(t, apierrors.IsTooManyRequests(err), "a busy runner's eviction is refused: %v", err)
	assert.True(t, alive(t, r.pod))
}

// The way to end an ARC zombie: its EphemeralRunner deleted, ARC removes
// the runner from the service and deletes the pod. The record says it was
// a zombie, though ARC's delete passed as the job's end.
func TestAnARCZombieEndedThroughItsEphemeralRunnerIsRecordedAsAZombie(t *testing.T) {
	ns := newNamespace(t, nil)
	r, pod := spentConfigZombie(t, ns, "arc-spot-er")
	eventually(t, func() bool { _, ok := zombieOf(t, pod); return ok }, "the leader names it a zombie")
	r.deleteEphemeralRunner(t, clusterAdmin)
	r.removeFinalizer(t, arcscaleset.RegistrationFinalizer)
	require.NoError(t, deletePod(as(t, arcController), pod), "ARC's delete once the service let the runner go passes")
	kubeletEnds(t, pod, podtest.ARCScaleSet(ns, "arc-spot-er").Terminated("runner", 143, "Error"))
	r.removeFinalizer(t, arcFinalizer)

	rec := oneDeath(t, pod)
	assert.Equal(t, string(death.ZombieEnded), rec.Class)
	assert.Equal(t, string(runnerpod.RuleJobOver), rec.DeleteRule)
	assert.Equal(t, clusterAdmin, rec.StartedBy)
	require.NotNil(t, rec.Zombie)
	assert.Equal(t, arcscaleset.SpentConfig, rec.Zombie.Kind)
}
