//go:build e2e

package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// tally is what both replicas have counted of the guard's decisions and
// of the owners not taken, each by operation and decision.
type tally map[string]float64

// countedNow reads both replicas' metrics endpoints.
func countedNow(t *testing.T) tally {
	t.Helper()
	out := tally{}
	for _, s := range []*apitest.Server{server, replica} {
		m, err := s.Scrape()
		require.NoError(t, err)
		for _, name := range []string{"runnerguard_guard_decisions_total", "runnerguard_guard_owner_not_taken_total"} {
			for _, series := range m.Series(name) {
				out[name+","+series.Labels["operation"]+","+series.Labels["decision"]] += series.Value
			}
		}
	}
	return out
}

// loggedAnywhere waits until either replica has logged msg with every
// key of want at its value, as the log line prints it.
func loggedAnywhere(t *testing.T, msg string, want map[string]any) {
	t.Helper()
	eventually(t, func() bool {
		for _, s := range []*apitest.Server{server, replica} {
			lines, err := s.LogLines(msg)
			require.NoError(t, err)
			for _, l := range lines {
				if matches(l, want) {
					return true
				}
			}
		}
		return false
	}, "a replica logs "+msg)
}

func matches(line, want map[string]any) bool {
	for k, v := range want {
		if line[k] != v {
			return false
		}
	}
	return true
}

const (
	deniedDeletes   = "runnerguard_guard_decisions_total,delete,deny"
	deniedEvictions = "runnerguard_guard_decisions_total,eviction,deny"
	notTakenDeletes = "runnerguard_guard_owner_not_taken_total,delete,deny"
)

// Nothing is counted of a review that was not sent or not carried out:
// reviews posted straight to the webhook by anyone on the pod network (of
// a pod that does not exist, or under another UID), and dry-run deletes
// and evictions through the API server (a dry-run drain's only in the
// Eviction's options). The decisions counter feeds the alerts on refused
// deletes and on a drain waiting; the owner-not-taken counter the alert on
// a refused manager. The real refusals that follow are counted, once each.
func TestAReviewNotSentOrNotCarriedOutCountsNothing(t *testing.T) {
	ns := newNamespace(t, nil)
	manager := "system:serviceaccount:" + ns + ":gitlab-runner"
	busy := create(t, nil, busyRunner(ns, "busy"))
	build := create(t, as(t, manager), podtest.GitLab(ns, "build").RunningSince("build", time.Now().Add(-time.Minute)).Obj())
	require.Equal(t, manager, build.Annotations[runnerpod.CreatedBy])
	before := countedNow(t)

	t.Run("forged reviews of pods that are not there, or not with that UID", func(t *testing.T) {
		ghost := busyRunner(ns, "ghost")
		ghost.UID = types.UID("ghost-uid")
		other := busy.DeepCopy()
		other.UID = types.UID("forged-uid")
		ghostBuild := build.DeepCopy()
		ghostBuild.Name, ghostBuild.UID = "ghost-build", types.UID("ghost-build-uid")
		for range 10 {
			assert.False(t, askGuard(t, deleteReview(t, ghost, reaper)).Allowed)
			assert.False(t, askGuard(t, deleteReview(t, other, reaper)).Allowed)
			assert.False(t, askGuard(t, deleteReview(t, ghostBuild, manager)).Allowed, "the manager is named the owner, and not taken")
		}
		for _, uid := range []string{"ghost-uid", "forged-uid", "ghost-build-uid"} {
			loggedAnywhere(t, "no metric, Event or note: the pod does not exist with the review's UID, or its deletion had begun", map[string]any{"uid": uid})
		}
	})

	t.Run("dry-run deletes and evictions through the API server", func(t *testing.T) {
		reaperDry, drainerDry := "dry-reaper@"+ns, "dry-drainer@"+ns
		err := deletePod(as(t, reaperDry), busy, client.DryRunAll)
		require.True(t, apierrors.IsForbidden(err), "the dry run gets the real answer; got %v", err)
		err = evict(as(t, drainerDry), busy, true)
		require.True(t, apierrors.IsTooManyRequests(err), "a dry-run drain waits as a real one; got %v", err)
		err = deletePod(as(t, manager), build, client.DryRunAll)
		require.True(t, apierrors.IsForbidden(err), "the same-namespace manager is not taken; got %v", err)
		for _, who := range []string{reaperDry, drainerDry, manager} {
			loggedAnywhere(t, "decided", map[string]any{"requester": who, "dryRun": true})
		}
	})

	// The real ones, once each: the counters move by exactly these, so
	// nothing above moved them (its work after the answer is logged done).
	require.True(t, apierrors.IsForbidden(deletePod(as(t, reaper), busy)))
	require.True(t, apierrors.IsTooManyRequests(evict(as(t, "system:serviceaccount:kube-system:cluster-autoscaler"), busy, false)))
	require.True(t, apierrors.IsForbidden(deletePod(as(t, manager), build)))
	want := tally{deniedDeletes: before[deniedDeletes] + 2, deniedEvictions: before[deniedEvictions] + 1, notTakenDeletes: before[notTakenDeletes] + 1}
	var got tally
	assert.Eventually(t, func() bool {
		got = countedNow(t)
		return got[deniedDeletes] >= want[deniedDeletes] && got[deniedEvictions] >= want[deniedEvictions] && got[notTakenDeletes] >= want[notTakenDeletes]
	}, patience, 100*time.Millisecond, "the real refusals are counted")
	for key, n := range want {
		assert.Equal(t, n, got[key], key)
	}
	for _, e := range podEvents(t, busy) {
		assert.NotContains(t, e.Note, "dry-", "no Event names a dry run's requester: %s", e.Note)
	}
}
