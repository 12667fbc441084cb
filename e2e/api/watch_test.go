//go:build e2e

package api

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/webhook/death"
	"github.com/runnerguard/runnerguard/webhook/podtest"
	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

func writeAdminKubeconfig(c *apitest.Cluster, dir string) error {
	u, err := c.Env.AddUser(envtest.User{Name: "operator", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kc, err := u.KubeConfig()
	if err != nil {
		return err
	}
	adminKubeconfig = filepath.Join(dir, "admin.kubeconfig")
	return os.WriteFile(adminKubeconfig, kc, 0o600)
}

// setStatus writes the pod's status as the kubelet would.
func setStatus(t *testing.T, pod *corev1.Pod, status corev1.PodStatus) {
	t.Helper()
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	got.Status = status
	require.NoError(t, admin.Status().Update(context.Background(), got))
}

func diedEvents(t *testing.T, pod *corev1.Pod) []eventsv1.Event {
	t.Helper()
	var out []eventsv1.Event
	for _, e := range podEvents(t, pod) {
		if e.Reason == death.ReasonDied && e.Regarding.UID == pod.UID {
			out = append(out, e)
		}
	}
	return out
}

// recordLines counts the death record log lines for the pod in both
// replicas' logs.
func recordLines(t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	n := 0
	for _, s := range []*apitest.Server{server, replica} {
		lines, err := s.LogLines(deathMsg)
		require.NoError(t, err)
		n += len(slices.DeleteFunc(lines, func(l map[string]any) bool {
			r, ok := l["record"].(map[string]any)
			return !ok || r["uid"] != string(pod.UID)
		}))
	}
	return n
}

// settle waits past a few of the watcher's chances to write twice.
func settle() { time.Sleep(2 * time.Second) }

func TestTheWatcherRecordsEachDeathOnceAcrossTwoReplicas(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := busyRunner(ns, "dies")
	// A pool runner that restarts in place (the API server refuses a
	// terminated container going back to waiting under restartPolicy Never).
	pod.Spec.RestartPolicy = corev1.RestartPolicyAlways
	pod = create(t, nil, pod)
	ended := podtest.Runner(ns, "dies").Terminated("runner", 1, "Error").Obj().Status
	setStatus(t, pod, ended)
	eventually(t, func() bool { return len(diedEvents(t, pod)) == 1 }, "the kubelet's report of the end is recorded")
	settle()
	setStatus(t, pod, ended) // a resync of the same status
	settle()
	require.Len(t, diedEvents(t, pod), 1, "one death, one Event, whichever replica leads")
	assert.Equal(t, 1, recordLines(t, pod), "and one log line")
	e := diedEvents(t, pod)[0]
	assert.Equal(t, corev1.EventTypeWarning, e.Type)
	assert.Equal(t, `runner "runner" died: error-exit; exit 1, reason Error`, e.Note)

	// It restarts in place and dies again: a new death.
	again := podtest.Runner(ns, "dies").Restarting("runner", 1, "Error").Obj().Status
	again.ContainerStatuses[0].LastTerminationState.Terminated.ContainerID = "containerd://runner-2"
	again.ContainerStatuses[0].LastTerminationState.Terminated.ExitCode = 139
	setStatus(t, pod, again)
	eventually(t, func() bool { return len(diedEvents(t, pod)) == 2 }, "a restart in place is a second death")
	settle()
	assert.Len(t, diedEvents(t, pod), 2)
}

func TestADeathCausedByAnOverrideDeleteNamesTheDeleter(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := busyRunner(ns, "overridden")
	pod.Annotations = map[string]string{runnerpod.AllowDelete: "rotate node"}
	pod = create(t, nil, pod)
	require.NoError(t, deletePod(as(t, "carol@example.com"), pod))
	// The kubelet stops the runner with SIGTERM and reports it.
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	st := podtest.Runner(ns, "overridden").Terminated("runner", 143, "Error").Obj().Status
	st.ContainerStatuses[0].State.Terminated.StartedAt = metav1.NewTime(time.Now().Add(-3 * time.Minute))
	st.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(time.Now())
	setStatus(t, pod, st)
	eventually(t, func() bool { return len(diedEvents(t, pod)) == 1 }, "the death is recorded")
	assert.Equal(t, `runner "runner" died: sigterm; exit 143 (signal 15), reason Error; ended by its pod's deletion by carol@example.com`, diedEvents(t, pod)[0].Note)
}

func TestTheWatcherKeepsRecordingAfterTheLeaderGoes(t *testing.T) {
	ns := newNamespace(t, nil)
	first := create(t, nil, busyRunner(ns, "before"))
	setStatus(t, first, podtest.Runner(ns, "before").Terminated("runner", 0, "Completed").Obj().Status)
	eventually(t, func() bool { return len(diedEvents(t, first)) == 1 }, "recorded by the first leader")
	// Stop whichever replica leads, and restart it: the other takes over,
	// re-reads every pod, and must not record the first death again.
	for _, s := range []*apitest.Server{server, replica} {
		s.Stop()
		require.NoError(t, s.Start(context.Background()))
	}
	second := create(t, nil, busyRunner(ns, "after"))
	setStatus(t, second, podtest.Runner(ns, "after").Terminated("runner", 2, "Error").Obj().Status)
	require.Eventually(t, func() bool { return len(diedEvents(t, second)) == 1 }, 40*time.Second, 200*time.Millisecond, "the new leader records")
	settle()
	assert.Len(t, diedEvents(t, first), 1, "a change of leader does not record a death twice")
}

func TestAStuckRunnerGetsOneWarning(t *testing.T) {
	ns := newNamespace(t, nil)
	w := podtest.Runner(ns, "stuck").Waiting("runner", "ErrImagePull")
	w.Status.ContainerStatuses[0].State.Waiting.Message = "failed to pull image: 401 Unauthorized"
	pod := create(t, nil, w.Obj())
	eventually(t, func() bool {
		return slices.ContainsFunc(podEvents(t, pod), func(e eventsv1.Event) bool {
			return e.Reason == death.ReasonStuck && e.Type == corev1.EventTypeWarning
		})
	}, "a runner waiting past --stuck-after (3s here) is reported")
	settle()
	n := 0
	for _, e := range podEvents(t, pod) {
		if e.Reason == death.ReasonStuck {
			n++
			assert.Contains(t, e.Note, "ErrImagePull: failed to pull image: 401 Unauthorized")
		}
	}
	assert.Equal(t, 1, n)
}

func TestWhyTellsHowAGonePodsRunnerDied(t *testing.T) {
	ns := newNamespace(t, nil)
	final := `{"v":1,"ts":"2026-11-22T10:00:00Z","cg":"v2","oom":1,"oom_kill":1,"peak":268435456,"limit":268435456}`
	w := podtest.Runner(ns, "oom-gone").Terminated("runner", 137, "OOMKilled").SidecarTerminated(runnerpod.VitalsContainer, final)
	pod := create(t, nil, w.Obj())
	eventually(t, func() bool { return len(diedEvents(t, pod)) == 1 }, "recorded")
	forceRemove(pod)
	require.Eventually(t, func() bool { return !alive(t, pod) }, 10*time.Second, 100*time.Millisecond)

	out := runWhy(t, "oom-gone", "-n", ns)
	t.Logf("runnerguard why oom-gone:\n%s", out)
	for _, want := range []string{`runner "runner" died: cgroup-oom`, "exit code 137, signal 9, reason OOMKilled", "peak 256Mi of 256Mi limit, oom 1, oom_kill 1", "the vitals confirm an OOM kill"} {
		assert.Contains(t, out, want)
	}
	var rep death.Report
	require.NoError(t, json.Unmarshal([]byte(runWhy(t, "-n", ns, "oom-gone", "-o", "json")), &rep))
	assert.False(t, rep.Exists)
	require.Len(t, rep.Records, 1)
	assert.Equal(t, death.CgroupOOM, rep.Records[0].Class)

	assert.Contains(t, runWhy(t, "never-was", "-n", ns), "is gone and no runnerguard record of it remains")
}

func runWhy(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(server.Binary(), append([]string{"why", "--kubeconfig", adminKubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), errOut.String())
	return out.String()
}
