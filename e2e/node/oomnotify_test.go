//go:build node

package node

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/vitals/record"
)

// oomRuns is how many runners the kernel OOM-kills; each must be counted.
// OOM_RUNS splits them over shorter runs of the suite.
func oomRuns(t *testing.T) int {
	if s := os.Getenv("OOM_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		require.NoError(t, err, "OOM_RUNS")
		return n
	}
	return 10
}

// On cgroup v1 the kernel counts an OOM kill only in the victim's own
// cgroup, which runc removes as the runner dies; with the kernel's OOM
// notification (the suite installs inject.vitals.oomNotify) the sidecar
// reads the count before that, so every runner's record counts its kill.
// Where the notification is not available (cgroup v2, which counts kills
// hierarchically, needs none) the test says so and stops.
func TestEveryOOMKillIsCountedWhereNotified(t *testing.T) {
	ns := newNamespace(t)
	for i := range oomRuns(t) {
		t.Run(fmt.Sprintf("runner %d", i+1), func(t *testing.T) {
			t.Parallel()
			pod := start(t, runnerPod(ns, fmt.Sprintf("oom-%d", i), "64Mi", "oom", "200M", "1"))
			pod = waitPod(t, pod, "the runner's end and the sidecar's final reading", 90*time.Second, finished)
			term := containerStatus(pod, "runner").State.Terminated
			require.Equal(t, "OOMKilled", term.Reason, "the kubelet's reason")
			final, err := record.ParseFinal(containerStatus(pod, runnerpod.VitalsContainer).State.Terminated.Message)
			require.NoError(t, err, "the sidecar's termination message is its final reading")
			if final.Cgroup != "v1" || final.OOMWatch != "notified" {
				t.Skipf("the notification is not available here (cgroup %s, OOM watch %q)", final.Cgroup, final.OOMWatch)
			}
			assert.Equal(t, uint64(1), final.OOMKill, "the final reading counts the kill")
			assert.Positive(t, final.OOM, "the OOM the kernel notified")

			require.NoError(t, as(t, reaper).Delete(context.Background(), pod))
			var recs []death.Record
			require.Eventually(t, func() bool {
				recs = deathRecords(t, pod)
				return len(recs) > 0
			}, 30*time.Second, 500*time.Millisecond, "a RunnerDeath")
			r := recs[0]
			assert.Equal(t, string(death.CgroupOOM), r.Class)
			require.NotNil(t, r.Vitals)
			assert.Equal(t, "notified", r.Vitals.OOMWatch, "the record says the kernel's notification was used")
			assertOwnOOMKill(t, r, 64<<20, r.FinishedAt.Time)
			require.NotNil(t, r.OOMConfirmed)
			assert.True(t, *r.OOMConfirmed, "the vitals confirm the OOM class")
		})
	}
}
