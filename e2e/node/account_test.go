//go:build node

package node

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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

// A job step fills the runner container's writable layer past the
// container's ephemeral-storage limit: the kubelet's eviction manager
// evicts the pod at once (pod reason Evicted, its message naming the limit;
// for this eviction the kubelet sets no DisruptionTarget condition). The
// record calls it a storage eviction, not node pressure nor a kill, with the
// kubelet's message, and why tells it once the pod is gone. The kubelet
// removes an evicted pod's containers at once to reclaim the disk, and here
// it did so before it reported their end: the runner's status is then
// ContainerStatusUnknown, whose exit code and message are the kubelet's
// placeholders, and the runner's last words are gone with the container.
// The record must not pass the placeholder off as them.
func TestARunnerEvictedForItsEphemeralStorageLimitIsRecordedAsAStorageEviction(t *testing.T) {
	ns := newNamespace(t)
	pod := runnerPod(ns, "disk-hog", "64Mi")
	c := &pod.Spec.Containers[0]
	c.Resources.Limits[corev1.ResourceEphemeralStorage] = resource.MustParse("16Mi")
	c.Command = []string{"/bin/sh", "-c", `say() { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) runner: $*"; }
trap 'say "received SIGTERM, job cancelled"; exit 143' TERM
say "step writes 64MiB to the workspace"
dd if=/dev/zero of=/tmp/workspace.img bs=1M count=64 2>/dev/null
say "step done; next step running"
sleep 600 & wait $!`}
	pod = start(t, pod)
	pod = waitPod(t, pod, "the kubelet's eviction", 3*time.Minute, func(p *corev1.Pod) bool {
		return p.Status.Reason == "Evicted" && finished(p)
	})
	t.Logf("pod status: reason %s, message %q", pod.Status.Reason, pod.Status.Message)
	assert.Equal(t, "ephemeral-storage limit", death.EvictedFor(pod.Status.Message), "the kubelet evicted it for its own limit")

	var recs []death.Record
	require.Eventually(t, func() bool { recs = deathRecords(t, pod); return len(recs) > 0 }, 30*time.Second, 500*time.Millisecond, "a RunnerDeath")
	require.Len(t, recs, 1)
	r := recs[0]
	t.Logf("record: class %s (%s), exit %v, reason %s, message %q", r.Class, r.ClassBasis, *r.ExitCode, r.Reason, r.Message)
	assert.Equal(t, string(death.StorageEviction), r.Class)
	assert.Equal(t, "Evicted", r.PodReason)
	assert.Contains(t, r.ClassBasis, "the kubelet's eviction message")
	assert.Contains(t, r.PodMessage, "16Mi", "the kubelet's message names the limit")
	assert.False(t, r.Deleted, "nobody deleted the pod")
	lost := r.Reason == death.ReasonContainerStatusUnknown
	if lost {
		assert.Empty(t, r.Message, "the kubelet's placeholder is not the runner's last words")
	} else {
		assert.Contains(t, r.Message, "step writes 64MiB to the workspace", "the runner's last words")
	}

	require.NoError(t, admin.Delete(context.Background(), pod))
	require.Eventually(t, func() bool { return gone(t, pod) }, 30*time.Second, 250*time.Millisecond)
	out := runWhy(t, "disk-hog", "-n", ns)
	t.Logf("runnerguard why disk-hog -n %s:\n%s", ns, out)
	for _, want := range []string{`runner "runner" died: storage-eviction`, "pod reason Evicted", "why this class: the kubelet's eviction message",
		"pod message: Pod ephemeral local storage usage exceeds the total limit of containers 16Mi"} {
		assert.Contains(t, out, want)
	}
	if lost {
		assert.Contains(t, out, "the kubelet no longer found the container when it reported its end")
		assert.NotContains(t, out, "last words (")
	} else {
		assert.Contains(t, out, "runner: step writes 64MiB to the workspace")
	}
}
