//go:build node

package node

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// drain runs kubectl drain on the node for the runner pods of ns. The
// webhook's own pods run on this one node too and would have nowhere to
// go, so the drain is limited to the suite's runners by --pod-selector;
// the node is cordoned all the same, and uncordoned after the test. The
// suite's runner pods have no controller, which kubectl drain accepts only
// with --force (it still evicts them: --force is not --disable-eviction).
func drain(t *testing.T, ns string, timeout time.Duration) (string, error) {
	t.Helper()
	t.Cleanup(func() {
		out, err := exec.Command(kubectlBin, "--kubeconfig="+kubeconfigPath, "uncordon", nodeName).CombinedOutput()
		if err != nil {
			t.Errorf("uncordon: %v: %s", err, out)
		}
	})
	start := time.Now()
	out, err := exec.Command(kubectlBin, "--kubeconfig="+kubeconfigPath, "drain", nodeName,
		"--pod-selector="+runnerLabel+"="+ns, "--force", "--ignore-daemonsets", "--delete-emptydir-data",
		"--timeout="+timeout.String()).CombinedOutput()
	t.Logf("kubectl drain (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	return string(out), err
}

func gone(t *testing.T, pod *corev1.Pod) bool {
	err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
	return apierrors.IsNotFound(err)
}

func TestDrainWaitsForABusyRunnerAndCompletesWhenItsJobEnds(t *testing.T) {
	ns := newNamespace(t)
	const job = 15 * time.Second
	pod := start(t, runnerPod(ns, "busy", "64Mi", "job", "15"))
	began := pod.CreationTimestamp.Time

	out, err := drain(t, ns, 2*time.Minute)
	require.NoError(t, err, "the drain completes once the job has ended")
	assert.Contains(t, out, "will retry after 5s", "kubectl drain was answered 429 and retried")
	assert.GreaterOrEqual(t, time.Since(began), job, "the drain waited for the job")
	require.Eventually(t, func() bool { return gone(t, pod) }, 30*time.Second, 250*time.Millisecond)

	var recs []death.Record
	require.Eventually(t, func() bool {
		recs = deathRecords(t, pod)
		return len(recs) > 0
	}, 30*time.Second, 500*time.Millisecond, "the evicted pod's death record")
	assert.Equal(t, string(death.CleanExit), recs[0].Class, "the runner ended its job before its pod was evicted")
}

func TestDrainWithTheOverrideAnnotationEvictsABusyRunnerAtOnce(t *testing.T) {
	ns := newNamespace(t)
	pod := start(t, runnerPod(ns, "busy", "64Mi", "job", "300"))
	patch := client.MergeFrom(pod.DeepCopy())
	// Added to the pod's own annotations: the record of its creator is
	// kept as written at CREATE.
	metav1.SetMetaDataAnnotation(&pod.ObjectMeta, runnerpod.AllowDelete, "node maintenance")
	require.NoError(t, admin.Patch(context.Background(), pod, patch))

	// Its job would run for minutes: the drain completes within its
	// timeout only by evicting it, and at once, refused no eviction.
	out, err := drain(t, ns, time.Minute)
	require.NoError(t, err, "the drain completes")
	assert.NotContains(t, out, "will retry", "no eviction was refused")
	require.Eventually(t, func() bool { return gone(t, pod) }, 30*time.Second, 250*time.Millisecond)

	// The record says the runner was drained: its pod evicted while its
	// node was cordoned, by whom and on what grounds, with the runner's
	// last words; why tells it with the pod gone.
	var recs []death.Record
	require.Eventually(t, func() bool { recs = deathRecords(t, pod); return len(recs) > 0 }, 30*time.Second, 500*time.Millisecond, "the drained runner's record")
	require.Len(t, recs, 1)
	r := recs[0]
	t.Logf("record: class %s (%s), exit %v, deleted by %s (%s), node %+v", r.Class, r.ClassBasis, *r.ExitCode, r.DeletedBy, r.DeleteRule, r.NodeState)
	assert.Equal(t, string(death.NodeDisrupted), r.Class)
	assert.Contains(t, r.ClassBasis, "the node was cordoned (a drain)")
	require.NotNil(t, r.NodeState)
	assert.Contains(t, r.NodeState.Taints, corev1.TaintNodeUnschedulable)
	require.NotNil(t, r.Disruption, "the eviction's DisruptionTarget")
	assert.Equal(t, "EvictionByEvictionAPI", r.Disruption.Reason)
	assert.True(t, r.Deleted)
	assert.NotEmpty(t, r.DeletedBy, "who evicted it")
	assert.Equal(t, "override", r.DeleteRule)
	assert.Equal(t, int32(143), *r.ExitCode, "the runner ended on the eviction's SIGTERM")
	assert.Contains(t, r.Message, "received SIGTERM, job cancelled", "the runner's last words")
	why := runWhy(t, "busy", "-n", ns)
	t.Logf("runnerguard why busy -n %s:\n%s", ns, why)
	for _, want := range []string{`runner "runner" died: node-disrupted`, "the node was cordoned (a drain)", "disruption: EvictionByEvictionAPI",
		"requested by " + r.DeletedBy, "runner: received SIGTERM, job cancelled"} {
		assert.Contains(t, why, want)
	}
}
