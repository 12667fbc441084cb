//go:build node

package node

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestABusyRunnerSurvivesTheReaperAndFinishesItsJob(t *testing.T) {
	ns := newNamespace(t)
	pod := start(t, runnerPod(ns, "busy", "64Mi", "job", "12"))

	err := as(t, reaper).Delete(context.Background(), pod)
	require.Error(t, err, "the reaper's delete of a busy runner")
	assert.True(t, apierrors.IsForbidden(err), "403, got %v", err)
	assert.Contains(t, err.Error(), runnerpod.AllowDelete, "the refusal says how to override")
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(podEvents(t, pod), func(e eventsv1.Event) bool {
			return e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, reaper)
		})
	}, 15*time.Second, 250*time.Millisecond, "a Warning Event on the pod names the reaper")

	pod = waitPod(t, pod, "the job to finish", 60*time.Second, finished)
	assert.Nil(t, pod.DeletionTimestamp, "the pod was never marked for deletion")
	term := containerStatus(pod, "runner").State.Terminated
	assert.Equal(t, int32(0), term.ExitCode, "the runner finished its job undisturbed")
	assert.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	out := logs(t, pod, "runner")
	assert.Contains(t, out, "job finished, exiting 0")
	assert.NotContains(t, out, "SIGTERM", "the runner was never signalled")
}

// What the chart's policy and the guard's connect review say when they
// refuse (shortened).
const (
	execRefused     = "refused exec into runner container"
	deadlineRefused = "spec.activeDeadlineSeconds set or shortened on a busy runner"
	imageRefused    = "a container's image changed on a busy runner"
)

// A reaper granted edit in the runner's namespace (and nothing more) tries
// the ways to end a busy runner's job that are no delete: a process of its
// own in the runner container, a deadline the kubelet would enforce, an
// image the kubelet would restart the container with. Each is refused
// before it reaches the kubelet, and the job finishes normally.
func TestAnEditorCannotEndABusyRunnersJobWithoutADelete(t *testing.T) {
	ns := newNamespace(t)
	editor := withEdit(t, ns, serviceAccount(reaper))
	pod := start(t, runnerPod(ns, "busy", "64Mi", "job", "20"))
	ctx := context.Background()

	// The runner's shell ends its job on SIGTERM (exit 143).
	out, err := editor.kubectl("exec", "-n", ns, pod.Name, "-c", "runner", "--", "kill", "1")
	t.Logf("kubectl exec as %s: %v: %s", reaper, err, out)
	require.Error(t, err, "the exec is refused")
	assert.Contains(t, out, execRefused)
	assert.Contains(t, out, "runnerguard")

	// Read and changed again on a conflict, as a client would: the pod
	// moves on its own (its status as the kubelet reports it, the refusal
	// just kept on it), and only the guard's answer is asserted.
	edit := func(change func(*corev1.Pod)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &corev1.Pod{}
			require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
			change(got)
			return editor.client(t).Update(ctx, got)
		})
	}
	for _, tc := range []struct {
		name, refusal string
		change        func(*corev1.Pod)
	}{
		{"deadline", deadlineRefused, func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](1) }},
		// An image on the node: were the change let through, the kubelet
		// would restart the runner container with it.
		{"image", imageRefused, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "runnerguard.local/e2e/pause:1" }},
	} {
		err := edit(tc.change)
		require.Error(t, err, "the %s change is refused", tc.name)
		assert.True(t, apierrors.IsForbidden(err), "403, got %v", err)
		assert.Contains(t, err.Error(), tc.refusal)
	}

	pod = waitPod(t, pod, "the job to finish", 90*time.Second, finished)
	assert.Nil(t, pod.DeletionTimestamp)
	assert.Nil(t, pod.Spec.ActiveDeadlineSeconds, "no deadline was set")
	assert.Equal(t, runnerImage, pod.Spec.Containers[0].Image, "the image is the runner's")
	r := containerStatus(pod, "runner")
	assert.Zero(t, r.RestartCount)
	assert.Equal(t, int32(0), r.State.Terminated.ExitCode, "the runner finished its job undisturbed")
	assert.Equal(t, corev1.PodSucceeded, pod.Status.Phase)
	log := logs(t, pod, "runner")
	assert.Contains(t, log, "job finished, exiting 0")
	assert.NotContains(t, log, "SIGTERM", "the runner was never signalled")
	var recs []death.Record
	require.Eventually(t, func() bool { recs = deathRecords(t, pod); return len(recs) > 0 }, 30*time.Second, 500*time.Millisecond)
	assert.Equal(t, string(death.CleanExit), recs[0].Class)
}

// GitLab's manager runs a job's steps by exec into its build container: the
// job's owner, granted edit only, passes the connect review, and its
// command runs there under the kubelet; a reaper with the same role is
// refused the same exec.
func TestTheJobsOwnerExecsIntoItsBusyBuildContainer(t *testing.T) {
	ns := newNamespace(t)
	manager := withEdit(t, ns, serviceAccount(gitlabManager))
	editor := withEdit(t, ns, serviceAccount(reaper))
	pod := buildPod(ns, "job")
	require.NoError(t, manager.client(t).Create(context.Background(), pod))
	pod = waitPod(t, pod, "the build container to start", 60*time.Second, func(p *corev1.Pod) bool {
		s := containerStatus(p, "build")
		return s != nil && s.State.Running != nil
	})
	require.Equal(t, gitlabManager, pod.Annotations[runnerpod.CreatedBy])

	out, err := manager.kubectl("exec", "-n", ns, pod.Name, "-c", "build", "--", "sh", "-c", "echo step 2 ran in $(hostname)")
	require.NoError(t, err, "the owner's exec: %s", out)
	assert.Contains(t, out, "step 2 ran in job", "the command ran in the build container")

	out, err = editor.kubectl("exec", "-n", ns, pod.Name, "-c", "build", "--", "sh", "-c", "echo reaper was here")
	t.Logf("kubectl exec as %s: %v: %s", reaper, err, out)
	require.Error(t, err, "the reaper's exec is refused")
	assert.Contains(t, out, execRefused)
	assert.NotContains(t, out, "reaper was here")

	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), pod))
	b := containerStatus(pod, "build")
	require.NotNil(t, b.State.Running, "the job goes on")
	assert.Zero(t, b.RestartCount)
}
