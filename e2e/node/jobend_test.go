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
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// gitlabManager is the GitLab Runner manager's identity: it creates a build
// pod per job and deletes it when the job ends.
const gitlabManager = "system:serviceaccount:glr:gitlab-runner"

// buildPod is a GitLab-shaped build pod whose build container is the
// stand-in's build mode (a shell that ignores SIGTERM) with args.
func buildPod(ns, name string, args ...string) *corev1.Pod {
	p := podtest.GitLab(ns, name).Obj()
	p.UID = ""
	p.Labels = map[string]string{runnerLabel: ns}
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](3)
	for i := range p.Spec.InitContainers {
		// init-permissions: done at once.
		c := &p.Spec.InitContainers[i]
		c.Image, c.ImagePullPolicy, c.Args = runnerImage, corev1.PullNever, []string{"job", "0"}
	}
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		c.Image, c.ImagePullPolicy = runnerImage, corev1.PullNever
		c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
		c.Args = []string{"job", "3600"}
		if c.Name == "build" {
			c.Args = append([]string{"build"}, args...)
		}
	}
	return p
}

// startBuild creates the build pod as the manager and waits until its build
// container runs.
func startBuild(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	require.NoError(t, as(t, gitlabManager).Create(context.Background(), pod))
	return waitPod(t, pod, "the build container to start", 60*time.Second, func(p *corev1.Pod) bool {
		s := containerStatus(p, "build")
		return s != nil && s.State.Running != nil
	})
}

func ended(p *corev1.Pod) bool {
	s := containerStatus(p, "build")
	return s != nil && s.State.Terminated != nil
}

func TestTheManagerEndingAGitLabJobIsItsNormalEndNotADeath(t *testing.T) {
	ns := newNamespace(t)
	pod := startBuild(t, buildPod(ns, "job-ok"))
	require.Equal(t, gitlabManager, pod.Annotations[runnerpod.CreatedBy])
	require.NoError(t, as(t, gitlabManager).Delete(context.Background(), pod), "the job's owner ends its job")
	var recs []death.Record
	require.Eventually(t, func() bool { recs = deathRecords(t, pod); return len(recs) > 0 }, 90*time.Second, 500*time.Millisecond)
	r := recs[0]
	t.Logf("record: class %s, exit %v, deleted by %s (%s)", r.Class, *r.ExitCode, r.DeletedBy, r.DeleteRule)
	assert.Equal(t, string(death.JobEnded), r.Class, "SIGKILL after the grace period, of the owner's delete")
	assert.Equal(t, int32(137), *r.ExitCode)
	assert.Equal(t, gitlabManager, r.DeletedBy)
	var evs []eventsv1.Event
	require.Eventually(t, func() bool {
		evs = slices.DeleteFunc(podEvents(t, pod), func(e eventsv1.Event) bool { return e.Reason != death.ReasonJobEnded })
		return len(evs) == 1
	}, 30*time.Second, 250*time.Millisecond, "a RunnerJobEnded Event")
	assert.Equal(t, corev1.EventTypeNormal, evs[0].Type)
	assert.Empty(t, slices.DeleteFunc(podEvents(t, pod), func(e eventsv1.Event) bool { return e.Reason != death.ReasonDied }), "no RunnerDied Warning")
	assert.Contains(t, runWhy(t, "job-ok", "-n", ns), "the job's owner, "+gitlabManager+", ended the job by deleting its pod")
}

func TestAGitLabJobWhoseStepWasOOMKilledKeepsTheEvidence(t *testing.T) {
	ns := newNamespace(t)
	pod := startBuild(t, buildPod(ns, "job-oom", "200M"))
	// The step's kill is in the vitals before the manager ends the job,
	// while the build container lives on.
	require.Eventually(t, func() bool { return streamSawOOMKill(t, pod) }, 60*time.Second, 500*time.Millisecond, "the vitals count the step's OOM kill")
	require.Eventually(t, func() bool { return strings.Contains(logs(t, pod, "build"), "step ended with 137") }, 30*time.Second, 250*time.Millisecond,
		"the step's shell saw its child killed")
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), pod))
	require.NotNil(t, containerStatus(pod, "build").State.Running, "the build container outlived its step's kill")
	deleted := time.Now()
	require.NoError(t, as(t, gitlabManager).Delete(context.Background(), pod))
	var recs []death.Record
	require.Eventually(t, func() bool { recs = deathRecords(t, pod); return len(recs) > 0 }, 90*time.Second, 500*time.Millisecond)
	r := recs[0]
	assert.Equal(t, string(death.CgroupOOM), r.Class, "the OOM evidence classifies the record")
	assert.Equal(t, "build", r.Container)
	// The build container's own limit, peak, kill and its time: the kill
	// came before the manager's delete, not at the pod's end.
	assertOwnOOMKill(t, r, 64<<20, deleted)
	assert.Equal(t, gitlabManager, r.DeletedBy)

	require.Eventually(t, func() bool { return gone(t, pod) }, 60*time.Second, 250*time.Millisecond)
	out := runWhy(t, "job-oom", "-n", ns)
	t.Logf("runnerguard why job-oom -n %s:\n%s", ns, out)
	assert.Contains(t, out, `runner "build" died: cgroup-oom`)
	assert.Regexp(t, `memory of the runner container "build" \(its own cgroup, v[12]\): peak \S+ of 64Mi limit, oom \d+, oom_kill 1, first OOM kill seen at `, out)
	assert.Contains(t, out, "requested by "+gitlabManager)
}

func TestAGitLabJobPastItsDeadlineIsAJobTimeout(t *testing.T) {
	ns := newNamespace(t)
	p := buildPod(ns, "job-late")
	// GitLab sets activeDeadlineSeconds to the job's timeout.
	p.Spec.ActiveDeadlineSeconds = ptr.To[int64](8)
	pod := startBuild(t, p)
	pod = waitPod(t, pod, "the deadline", 2*time.Minute, ended)
	assert.Equal(t, "DeadlineExceeded", pod.Status.Reason)
	var recs []death.Record
	require.Eventually(t, func() bool { recs = deathRecords(t, pod); return len(recs) > 0 }, 60*time.Second, 500*time.Millisecond)
	assert.Equal(t, string(death.JobTimeout), recs[0].Class)
	assert.Equal(t, "DeadlineExceeded", recs[0].PodReason)
}
