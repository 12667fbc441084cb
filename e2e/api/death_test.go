//go:build e2e

package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/webhook/podtest"
	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

const deathMsg = "runner death record"

func recordsFor(t *testing.T, uid string) []map[string]any {
	t.Helper()
	lines, err := server.LogLines(deathMsg)
	require.NoError(t, err)
	var out []map[string]any
	for _, l := range lines {
		if r, ok := l["record"].(map[string]any); ok && r["uid"] == uid {
			out = append(out, r)
		}
	}
	return out
}

func TestDeleteOfAnOOMKilledRunnerWritesOneDeathRecord(t *testing.T) {
	ns := newNamespace(t, nil)
	final := `{"v":1,"ts":"2026-11-22T10:00:00Z","cg":"v1","oom":1,"oom_kill":1,"peak":67108864,"limit":67108864,"current":1216512}`
	w := podtest.Runner(ns, "oom").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final)
	w.Spec.InitContainers = append(w.Spec.InitContainers, corev1.Container{Name: runnerpod.VitalsContainer, Image: "example.com/vitals:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
	w.Status.Phase = corev1.PodRunning
	pod := create(t, nil, w.Obj())
	require.NoError(t, deletePod(as(t, reaper), pod))
	require.NoError(t, deletePod(as(t, reaper), pod), "a second delete of the terminating pod")

	var recs []map[string]any
	require.Eventually(t, func() bool { recs = recordsFor(t, string(pod.UID)); return len(recs) > 0 }, 10*time.Second, 100*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	recs = recordsFor(t, string(pod.UID))
	require.Len(t, recs, 1, "one death, one record")
	r := recs[0]
	t.Logf("death record: %v", r)
	assert.Equal(t, "cgroup-oom", r["class"])
	assert.Equal(t, 137.0, r["exitCode"])
	assert.Equal(t, 9.0, r["signal"])
	assert.Equal(t, "OOMKilled", r["reason"])
	// The watcher may see the terminated runner before the delete comes:
	// then its record, written first, carries no deleter, and the guard's
	// is the one the API server refuses as a duplicate.
	if by, ok := r["deletedBy"]; ok {
		assert.Equal(t, reaper, by)
	}
	assert.Equal(t, "node-e2e", r["node"])
	assert.Equal(t, true, r["oomConfirmed"])
	assert.Equal(t, 1.0, r["vitals"].(map[string]any)["oom_kill"])
}

func TestDeleteOfASucceededRunnerPodRecordsACleanExit(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, podtest.Runner(ns, "done").Terminated("runner", 0, "Completed").Phase(corev1.PodSucceeded).Obj())
	require.NoError(t, deletePod(as(t, reaper), pod))
	require.Eventually(t, func() bool { return len(recordsFor(t, string(pod.UID))) == 1 }, 10*time.Second, 100*time.Millisecond)
	assert.Equal(t, "clean-exit", recordsFor(t, string(pod.UID))[0]["class"])
}

func TestForceDeleteOfARunningRunnerRecordsThatItWasStillRunning(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := busyRunner(ns, "forced")
	pod.Annotations = map[string]string{runnerpod.AllowDelete: "stuck node"}
	pod = create(t, nil, pod)
	require.NoError(t, deletePod(as(t, reaper), pod, client.GracePeriodSeconds(0)))
	require.Eventually(t, func() bool { return len(recordsFor(t, string(pod.UID))) == 1 }, 10*time.Second, 100*time.Millisecond)
	r := recordsFor(t, string(pod.UID))[0]
	assert.Equal(t, "deleted-running", r["class"])
	assert.Equal(t, reaper, r["deletedBy"])
	assert.NotContains(t, r, "exitCode")
}
