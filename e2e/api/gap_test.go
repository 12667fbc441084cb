//go:build e2e

package api

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

// leading reports whether s holds the watcher's lease, as its own metrics
// say (controller-runtime's leader_election_master_status).
func leading(t *testing.T, s *apitest.Server) bool {
	t.Helper()
	m, err := s.Scrape()
	require.NoError(t, err)
	return slices.ContainsFunc(m.Series("leader_election_master_status"), func(s apitest.Sample) bool { return s.Value == 1 })
}

// leaderAndFollower waits until one replica leads, and names both.
func leaderAndFollower(t *testing.T) (leader, follower *apitest.Server) {
	t.Helper()
	require.Eventually(t, func() bool {
		switch {
		case leading(t, server):
			leader, follower = server, replica
		case leading(t, replica):
			leader, follower = replica, server
		default:
			return false
		}
		return true
	}, patience, 200*time.Millisecond, "a replica leads")
	return leader, follower
}

func TestRunnerPodsRemovedWhileNoReplicaLeadsAreRecordedOnceByTheNextLeader(t *testing.T) {
	ns := newNamespace(t, nil)
	ended := create(t, nil, busyRunner(ns, "ends-in-gap"))
	running := create(t, nil, busyRunner(ns, "runs-in-gap"))
	// Recorded by the old leader: one pod removed just before the kill,
	// whose record is the oldest of the namespace's four (the suite keeps
	// 3), and three that stay until the gap.
	var recorded []*corev1.Pod
	for _, name := range []string{"gone-before", "ended-before", "filler-1", "filler-2"} {
		pod := create(t, nil, busyRunner(ns, name))
		setStatus(t, pod, podtest.Runner(ns, name).Terminated("runner", 3, "Error").Obj().Status)
		oneDeath(t, pod)
		recorded = append(recorded, pod)
	}
	goneBefore, before := recorded[0], recorded[1]
	eventually(t, func() bool { return len(diedEvents(t, before)) == 1 }, "notified by the leader")
	// Retention would collect its record now (its pod is gone), and the
	// next leader, planning the removal again, would write it again: the
	// record of a pod removed lately is spared.
	forceRemove(goneBefore)
	caughtUp(t)

	// The leader dies without handing its lease over: no replica leads
	// until the lease expires.
	leader, follower := leaderAndFollower(t)
	require.NoError(t, syscall.Kill(leader.Pid(), syscall.SIGKILL))
	leader.Stop() // reaps it
	defer func() { require.NoError(t, leader.Start(context.Background())) }()

	// In the gap: a runner ends and its pod is force-deleted, a running
	// runner's pod is force-deleted (pod GC of a lost node), and the pod
	// whose death the old leader recorded goes too.
	writeStatus(t, ended, podtest.Runner(ns, "ends-in-gap").Terminated("runner", 1, "Error").Obj().Status)
	for _, pod := range []*corev1.Pod{ended, running, before} {
		forceRemove(pod)
		require.False(t, alive(t, pod))
	}
	require.False(t, leading(t, follower), "the pods went before the follower led: the gap is what this test is about")

	require.Eventually(t, func() bool { return leading(t, follower) }, patience, 200*time.Millisecond, "the follower takes over")
	gotEnded, gotRunning := oneDeath(t, ended), oneDeath(t, running)
	assert.Equal(t, string(death.ErrorExit), gotEnded.Class, "its runner's end, as its final state showed it")
	assert.True(t, gotRunning.Deleted, "removed while its runner ran")
	assert.Len(t, deathsOf(t, before), 1, "the old leader's record is not written again")
	assert.Equal(t, 1, recordedLines(t, before), "nor notified again (the Events themselves expire)")
	assert.Equal(t, 1, recordedLines(t, goneBefore), "a pod removed just before the kill is not recorded again either")
}

// recordedLines counts the "runner death recorded" log lines of pod's
// deaths across both replicas: one a record written and notified.
func recordedLines(t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	n := 0
	for _, s := range []*apitest.Server{server, replica} {
		lines, err := s.LogLines("runner death recorded")
		require.NoError(t, err)
		for _, l := range lines {
			if r, ok := l["record"].(map[string]any); ok && r["uid"] == string(pod.UID) {
				n++
			}
		}
	}
	return n
}
