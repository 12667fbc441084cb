//go:build node

package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/death"
)

// The kubelet kills a runner whose liveness probe fails: SIGTERM, the
// runner's trap says so in its log, exit 143. The pod was neither deleted
// nor disrupted, so the record calls it a probe kill (an inference, said as
// one), keeps the runner's last log lines, and why tells it all once the
// pod is gone.
func TestARunnerKilledByItsLivenessProbeIsRecordedAsAProbeKill(t *testing.T) {
	ns := newNamespace(t)
	pod := runnerPod(ns, "unhealthy", "64Mi", "job", "300")
	// Healthy for its first seconds, then never again: the probe reads a
	// file the runner's job never writes.
	pod.Spec.Containers[0].LivenessProbe = &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/sh", "-c", "test -e /tmp/healthy"}}},
		InitialDelaySeconds: 3, PeriodSeconds: 1, FailureThreshold: 2, TimeoutSeconds: 5,
	}
	pod = start(t, pod)
	pod = waitPod(t, pod, "the probe's kill", 2*time.Minute, finished)
	term := containerStatus(pod, "runner").State.Terminated
	assert.Equal(t, int32(143), term.ExitCode, "the kubelet stopped the runner with SIGTERM")
	assert.Nil(t, pod.DeletionTimestamp, "nobody deleted the pod")

	var recs []death.Record
	require.Eventually(t, func() bool { recs = deathRecords(t, pod); return len(recs) > 0 }, 30*time.Second, 500*time.Millisecond, "a RunnerDeath")
	r := recs[0]
	t.Logf("record: class %s (%s), exit %v, message %q", r.Class, r.ClassBasis, *r.ExitCode, r.Message)
	assert.Equal(t, string(death.ProbeKill), r.Class)
	assert.True(t, r.LivenessProbe, "the record says the runner had a liveness probe")
	assert.Contains(t, r.ClassBasis, "inferred", "the class says it is an inference")
	assert.Contains(t, r.Message, "received SIGTERM, job cancelled", "the runner's last words")
	assert.False(t, r.Deleted)

	require.NoError(t, admin.Delete(context.Background(), pod))
	require.Eventually(t, func() bool { return gone(t, pod) }, 30*time.Second, 250*time.Millisecond)
	out := runWhy(t, "unhealthy", "-n", ns)
	t.Logf("runnerguard why unhealthy -n %s:\n%s", ns, out)
	for _, want := range []string{`runner "runner" died: probe-kill`, "the kubelet killed the runner for failing its liveness probe",
		"exit code 143", "why this class: inferred", "last words", "runner: received SIGTERM, job cancelled"} {
		assert.Contains(t, out, want)
	}
}
