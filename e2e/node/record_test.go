//go:build node

package node

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/death"
)

// A pool runner that restarts in place dies more than once in one pod: each
// death is on record, once.
func TestEachDeathOfARunnerRestartingInPlaceIsRecordedOnce(t *testing.T) {
	ns := newNamespace(t)
	pod := runnerPod(ns, "restarts", "64Mi", "job", "1", "3")
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod = start(t, pod)
	require.Eventually(t, func() bool { return len(deathRecords(t, pod)) >= 2 }, 120*time.Second, 500*time.Millisecond,
		"two deaths of the restarting runner are recorded")
	ids := map[string]bool{}
	for _, r := range deathRecords(t, pod) {
		assert.Equal(t, string(death.ErrorExit), r.Class)
		require.NotNil(t, r.ExitCode)
		assert.Equal(t, int32(3), *r.ExitCode)
		assert.False(t, ids[r.ContainerID], "container %s recorded twice", r.ContainerID)
		ids[r.ContainerID] = true
	}
}

// A runner whose image cannot be pulled never starts: a RunnerStuck Warning
// says why, with the waiting reason current when it was written (the runner
// may first be reported waiting on its pod's init containers, then on the
// pull). The image is on a loopback port nothing listens on.
func TestARunnerWhoseImageCannotBePulledIsReportedStuck(t *testing.T) {
	ns := newNamespace(t)
	pod := runnerPod(ns, "no-image", "64Mi", "job", "1")
	pod.Spec.Containers[0].Image, pod.Spec.Containers[0].ImagePullPolicy = "127.0.0.1:1/ci/runner:missing", corev1.PullIfNotPresent
	require.NoError(t, admin.Create(context.Background(), pod))
	var pull eventsv1.Event
	require.Eventually(t, func() bool {
		i := slices.IndexFunc(podEvents(t, pod), func(e eventsv1.Event) bool {
			return e.Reason == death.ReasonStuck && (strings.Contains(e.Note, "ErrImagePull") || strings.Contains(e.Note, "ImagePullBackOff"))
		})
		if i >= 0 {
			pull = podEvents(t, pod)[i]
		}
		return i >= 0
	}, 3*time.Minute, 500*time.Millisecond, "RunnerStuck for the pull")
	assert.Equal(t, corev1.EventTypeWarning, pull.Type)
	t.Logf("RunnerStuck: %s", pull.Note)
}

// runnerguard why answers after the pod is gone, from its RunnerDeath.
func TestWhyTellsHowTheRunnerOfAGonePodDied(t *testing.T) {
	ns := newNamespace(t)
	pod := start(t, runnerPod(ns, "why-me", "64Mi", "job", "1", "2"))
	pod = waitPod(t, pod, "the runner to end", 60*time.Second, finished)
	require.Eventually(t, func() bool { return len(deathRecords(t, pod)) == 1 }, 30*time.Second, 250*time.Millisecond)
	require.NoError(t, admin.Delete(context.Background(), pod))
	require.Eventually(t, func() bool { return gone(t, pod) }, 30*time.Second, 250*time.Millisecond)

	out := runWhy(t, "why-me", "-n", ns)
	t.Logf("runnerguard why why-me -n %s:\n%s", ns, out)
	for _, want := range []string{`runner "runner" died: error-exit`, "exit code 2, reason Error", `memory of the runner container "runner" (its own cgroup, v1): peak`, "memory of the pod (every container and the vitals sidecar): peak", "last words"} {
		assert.Contains(t, out, want)
	}
}

var whyBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "runnerguard-why-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "runnerguard")
	build := exec.Command("go", "build", "-o", bin, "./cmd/runnerguard")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w: %s", err, out)
	}
	return bin, nil
})

// runWhy runs runnerguard why as an operator would, with the admin's
// kubeconfig.
func runWhy(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := whyBin()
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, append([]string{"why", "--kubeconfig", kubeconfigPath}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	return stdout.String()
}

// eventTTL is the node cluster's --event-ttl (e2e/cluster up.go).
const eventTTL = time.Minute

// A death stays on record after its Events expire and the webhook pods
// (the watcher's leader among them) are replaced: nothing is recorded
// twice, and neither a forged Event nor a forged deleter changes what
// runnerguard why prints.
func TestARecordOutlivesItsEventsAndAWatcherRestart(t *testing.T) {
	ns := newNamespace(t)
	pod := start(t, runnerPod(ns, "lasting", "64Mi", "job", "1", "3"))
	pod = waitPod(t, pod, "the runner's end", 60*time.Second, finished)
	require.Eventually(t, func() bool { return len(deathRecords(t, pod)) == 1 }, 60*time.Second, 500*time.Millisecond)
	died := func() []eventsv1.Event {
		return slices.DeleteFunc(podEvents(t, pod), func(e eventsv1.Event) bool { return e.Reason != death.ReasonDied })
	}
	require.Eventually(t, func() bool { return len(died()) == 1 }, 30*time.Second, 500*time.Millisecond, "notified")
	before := runWhy(t, "lasting", "-n", ns)

	// Anyone with events create can write this.
	forged := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lasting.forged"}, EventTime: metav1.NowMicro(),
		Regarding:           corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: pod.Name, UID: pod.UID},
		ReportingController: "runnerguard.io/runnerguard", ReportingInstance: "forger", Action: "Died", Type: corev1.EventTypeNormal,
		Reason: death.ReasonDied, Note: `runner "runner" died: clean-exit`}
	require.NoError(t, admin.Create(context.Background(), forged))
	assert.Equal(t, before, runWhy(t, "lasting", "-n", ns), "a forged Event changes nothing")

	require.Eventually(t, func() bool { return len(podEvents(t, pod)) == 0 }, 4*eventTTL, time.Second,
		"the API server expires the pod's Events (--event-ttl %s)", eventTTL)
	restartWebhook(t)
	// The new leader lists every runner pod, this one among them, before
	// it sees the next: once the next death is on record, this one has been
	// looked at again.
	next := start(t, runnerPod(ns, "next", "64Mi", "job", "1", "4"))
	require.Eventually(t, func() bool { return len(deathRecords(t, next)) == 1 }, 90*time.Second, 500*time.Millisecond)
	recs := deathRecords(t, pod)
	require.Len(t, recs, 1, "not recorded twice")
	assert.Equal(t, string(death.ErrorExit), recs[0].Class)
	assert.Empty(t, died(), "nor notified twice")
	assert.Equal(t, before, runWhy(t, "lasting", "-n", ns), "why still answers, the same")
}
