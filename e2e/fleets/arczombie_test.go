//go:build fleets

package fleets

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/fleets/actionsapi"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// arcSpentConfig plays ARC issue 4588 with ARC's own controller: a busy
// runner's pod vanishes at once (its spot node's end; the namespace
// controller, whose deletes the guard never refuses, stands in for it),
// ARC makes a new pod for the same EphemeralRunner from the same Secret,
// and the new runner, whose one-job configuration the first pod spent,
// asks for a job forever. The leader names it a zombie; its eviction
// passes for anyone, a reaper's delete does not, and deleting its
// EphemeralRunner ends it; its record says it was one. It returns the
// check runs the two deaths added (the first pod's may be told).
func arcSpentConfig(t *testing.T, f *arcFleet) int {
	ctx := context.Background()
	f.svc.Queue(actionsapi.Job{RequestID: 107, ID: "31885502107", Name: "spot", Script: "echo on a spot node; sleep 600"})
	name := f.jobRunner(t, 107)
	first := f.runnerPod(t, name)
	f.marked(t, first, true)
	// The new pod is created in a later second than the job's write, as
	// any pod of a node's end is: the API server dates both to the second.
	time.Sleep(1100 * time.Millisecond)
	require.NoError(t, as(t, config.NamespaceController).CoreV1().Pods(f.ns).Delete(ctx, name,
		metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &first.uid}}))
	gone(t, first)
	// GitHub fails the job of a runner that stopped answering: the service
	// then lets ARC remove the runner when its EphemeralRunner goes.
	_ = f.svc.RunnerLost(name)
	key := client.ObjectKey{Namespace: f.ns, Name: name}
	var again podRef
	var z runnerpod.Zombie
	require.Eventually(t, func() bool {
		p := &corev1.Pod{}
		if admin.Get(ctx, key, p) != nil || p.UID == first.uid {
			return false
		}
		again = podRef{namespace: p.Namespace, name: p.Name, uid: p.UID}
		var named bool
		z, named = runnerpod.ZombieOf(p)
		// Its runner runs (asking for a job): a runner not started yet is
		// no one's busy runner, zombie or not.
		running := slices.ContainsFunc(p.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool { return s.Name == "runner" && s.State.Running != nil })
		return named && running
	}, 3*time.Minute, 250*time.Millisecond, "ARC re-creates the pod, its runner runs, and the leader names it a zombie")
	assert.Equal(t, arcscaleset.SpentConfig, z.Kind)

	err := as(t, arcReaper).CoreV1().Pods(f.ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &again.uid}})
	require.True(t, isForbidden(err), "a reaper the operator did not allow may not delete it: %v", err)
	assert.Contains(t, err.Error(), "it is a zombie (spent-config since")
	require.NoError(t, as(t, arcReaper).PolicyV1().Evictions(f.ns).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}),
		"its eviction passes, so its node can go")

	// Ended as the runbook says: its EphemeralRunner deleted, ARC removes
	// the runner from the service and deletes its pod.
	require.NoError(t, client.IgnoreNotFound(asClient(t, arcReaper).Delete(ctx, f.ephemeralRunner(t, name))))
	r := oneRecord(t, again)
	assert.Equal(t, string(death.ZombieEnded), r.Class, r.ClassBasis)
	if assert.NotNil(t, r.Zombie, "the record names the zombie") {
		assert.Equal(t, arcscaleset.SpentConfig, r.Zombie.Kind)
	}
	told := 0
	if rec := oneRecord(t, first); death.Class(rec.Class).Told() {
		told = 1
	}
	return told
}
