//go:build e2e

package api

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// runDeaths runs `runnerguard deaths` with args and returns what it printed.
func runDeaths(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(server.Binary(), append([]string{"deaths", "--kubeconfig", adminKubeconfig}, args...)...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), errOut.String())
	return out.String()
}

// deathsOfJob is what `runnerguard deaths --job id` finds in namespace ns.
func deathsOfJob(t *testing.T, ns, id string) []death.Record {
	t.Helper()
	// -o json prints the records as RunnerDeath objects, as kubectl would.
	var list v1alpha1.RunnerDeathList
	require.NoError(t, json.Unmarshal([]byte(runDeaths(t, "-n", ns, "--job", id, "-o", "json")), &list))
	var out []death.Record
	for i := range list.Items {
		out = append(out, death.FromObject(&list.Items[i]))
	}
	return out
}

// The runner's last lines, as FallbackToLogsOnError leaves them.
const lastWords = "[RUNNER 2026-11-01 11:12:38Z INFO JobDispatcher] Job build (linux) is running\n[WORKER 2026-11-01 11:12:39Z INFO StepsRunner] Processing step: make test"

func TestAnARCRunnersRecordNamesItsJobAndKeepsItsLastWords(t *testing.T) {
	ns := newNamespace(t, nil)
	ctx := context.Background()
	er := apitest.EphemeralRunner(ns, "arc-7x2k9")
	require.NoError(t, admin.Create(ctx, er))
	// ARC's listener assigns the job (the status as ARC 0.13 writes it).
	for field, v := range map[string]any{"phase": "Running", "jobRequestId": int64(41002), "jobId": "31885502817", "workflowRunId": int64(11802293411),
		"jobRepositoryName": "acme/app", "jobWorkflowRef": "acme/app/.github/workflows/ci.yml@refs/heads/main", "jobDisplayName": "build (linux)"} {
		require.NoError(t, unstructured.SetNestedField(er.Object, v, "status", field))
	}
	require.NoError(t, admin.Status().Update(ctx, er))
	pod := podtest.ARCScaleSet(ns, "arc-7x2k9").RunningSince("runner", time.Now().Add(-time.Minute)).Obj()
	pod.OwnerReferences[0].UID = er.GetUID()
	pod = create(t, as(t, arcController), pod)

	// The runner is OOM-killed; ARC deletes the pod of its finished runner.
	st := podtest.Runner(ns, pod.Name).Terminated("runner", 137, "OOMKilled").Obj().Status
	st.ContainerStatuses[0].State.Terminated.Message = lastWords
	setStatus(t, pod, st)
	require.NoError(t, deletePod(as(t, "system:serviceaccount:arc-systems:arc-gha-rs-controller"), pod))

	r := oneDeath(t, pod)
	assert.Equal(t, &v1alpha1.Job{ID: "31885502817", RequestID: "41002", Run: "11802293411", Project: "acme/app",
		Workflow: "acme/app/.github/workflows/ci.yml@refs/heads/main", Name: "build (linux)", Source: "EphemeralRunner/arc-7x2k9", CreatedBy: arcController}, r.Job,
		"the job, and who created its pod")
	assert.Equal(t, lastWords, r.Message, "the last words outlive the pod")
	found := deathsOfJob(t, ns, "31885502817")
	require.Len(t, found, 1, "deaths --job finds it")
	assert.Equal(t, r.UID, found[0].UID)
	assert.Empty(t, deathsOfJob(t, ns, "1"), "and no other job's")
	why := runWhy(t, "-n", ns, pod.Name)
	assert.Contains(t, why, "job 31885502817 (request 41002, run 11802293411, project acme/app")
	assert.Contains(t, why, "    | [WORKER 2026-11-01 11:12:39Z INFO StepsRunner] Processing step: make test\n")
}

func TestAGitLabBuildPodsRecordNamesItsJobAndProject(t *testing.T) {
	ns := newNamespace(t, nil)
	manager := as(t, ownerPrincipal)
	w := podtest.GitLab(ns, "runner-abc-project-42-concurrent-0").RunningSince("build", time.Now().Add(-time.Minute)).
		Annotate(gitlab.JobIDAnnotation, "5521").Annotate(gitlab.JobNameAnnotation, "test").
		Annotate(gitlab.JobURLAnnotation, "https://gitlab.example.com/acme/app/-/jobs/5521").
		Label(gitlab.ProjectIDLabel, "42")
	pod := create(t, manager, w.Obj())
	// The step is OOM-killed while the manager has not ended the job.
	st := podtest.GitLab(ns, pod.Name).Terminated("build", 137, "OOMKilled").Obj().Status
	setStatus(t, pod, st)
	r := oneDeath(t, pod)
	assert.Equal(t, &v1alpha1.Job{ID: "5521", Project: "42", Name: "test", URL: "https://gitlab.example.com/acme/app/-/jobs/5521", Source: runnerpod.JobFromPodMarks, CreatedBy: ownerPrincipal}, r.Job)
	found := deathsOfJob(t, ns, "5521")
	require.Len(t, found, 1)
	assert.Equal(t, "42", found[0].Job.Project)
}

// node creates a Node (no kubelet runs it) with taints, removed after t.
func node(t *testing.T, name string, taints ...corev1.Taint) *corev1.Node {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
	require.NoError(t, admin.Create(context.Background(), n))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), n) })
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: metav1.Now()}}
	require.NoError(t, admin.Status().Update(context.Background(), n))
	return n
}

func TestARunnerDeletedWhileTheAutoscalerRemovesItsNodeIsNodeDisrupted(t *testing.T) {
	ns := newNamespace(t, nil)
	n := node(t, "e2e-karpenter-disrupted", corev1.Taint{Key: death.TaintKarpenterDisrupted, Effect: corev1.TaintEffectNoSchedule})
	w := podtest.Runner(ns, "drained").Node(n.Name).RunningSince("runner", time.Now().Add(-time.Minute))
	pod := w.Annotate(runnerpod.AllowDelete, "karpenter consolidation").Obj()
	pod = create(t, nil, pod)
	require.NoError(t, evict(as(t, reaper), pod, false))
	// The runner takes the SIGTERM and exits; the API server's eviction
	// set the DisruptionTarget condition.
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	st := podtest.Runner(ns, pod.Name).Terminated("runner", 143, "Error").Obj().Status
	st.Conditions = got.Status.Conditions
	st.ContainerStatuses[0].State.Terminated.StartedAt.Time = time.Now().Add(-time.Minute)
	st.ContainerStatuses[0].State.Terminated.FinishedAt.Time = time.Now()
	setStatus(t, pod, st)
	r := oneDeath(t, pod)
	assert.Equal(t, string(death.NodeDisrupted), r.Class)
	require.NotNil(t, r.NodeState)
	// The API server's TaintNodesByCondition adds not-ready to a new Node,
	// whose kubelet never reported: kept too.
	assert.Contains(t, r.NodeState.Taints, death.TaintKarpenterDisrupted)
	assert.False(t, r.NodeState.Deleting)
	require.NotNil(t, r.Disruption)
	assert.Equal(t, "EvictionByEvictionAPI", r.Disruption.Reason)
	assert.Equal(t, reaper, r.DeletedBy)
	assert.Contains(t, r.ClassBasis, "Karpenter")
}

func TestTheKubeletsAccountChangesTheClass(t *testing.T) {
	cases := []struct {
		name   string
		pod    func(ns string) *corev1.Pod
		status func(ns, name string) corev1.PodStatus
		want   death.Class
		check  func(t *testing.T, r death.Record)
	}{
		{
			// As the real kubelet writes it (e2e/node): no DisruptionTarget,
			// and the runner's containers removed before their end was
			// reported, so its status is the kubelet's placeholder.
			name: "a pod evicted for its ephemeral-storage limit is a storage eviction with the kubelet's message",
			pod:  func(ns string) *corev1.Pod { return busyRunner(ns, "disk") },
			status: func(ns, name string) corev1.PodStatus {
				st := podtest.Runner(ns, name).Terminated("runner", 137, death.ReasonContainerStatusUnknown).Phase(corev1.PodFailed).Reason("Evicted").Obj().Status
				st.ContainerStatuses[0].State.Terminated.Message = "The container could not be located when the pod was terminated"
				st.Message = `Container runner exceeded its local ephemeral storage limit "1Gi". `
				return st
			},
			want: death.StorageEviction,
			check: func(t *testing.T, r death.Record) {
				assert.Equal(t, "Evicted", r.PodReason)
				assert.Contains(t, r.PodMessage, "exceeded its local ephemeral storage limit")
				assert.Nil(t, r.Disruption, "the kubelet sets no DisruptionTarget for this eviction")
				assert.Empty(t, r.Message, "the kubelet's placeholder is not the runner's last words")
			},
		},
		{
			name: "a probed runner killed in place is the kubelet's probe kill, said to be inferred",
			pod: func(ns string) *corev1.Pod {
				p := busyRunner(ns, "probed")
				p.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
				return p
			},
			status: func(ns, name string) corev1.PodStatus {
				return podtest.Runner(ns, name).Terminated("runner", 137, "Error").Phase(corev1.PodFailed).Obj().Status
			},
			want: death.ProbeKill,
			check: func(t *testing.T, r death.Record) {
				assert.True(t, r.LivenessProbe)
				assert.Contains(t, r.ClassBasis, "inferred")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t, nil)
			pod := create(t, nil, tc.pod(ns))
			setStatus(t, pod, tc.status(ns, pod.Name))
			r := oneDeath(t, pod)
			assert.Equal(t, string(tc.want), r.Class)
			tc.check(t, r)
			forceRemove(pod)
		})
	}
}
