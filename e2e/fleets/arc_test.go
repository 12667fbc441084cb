//go:build fleets

package fleets

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/fleets/actionsapi"
	"github.com/runnerguard/runnerguard/e2e/internal/nodecluster"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// arcReaper is a cleanup worker that deletes EphemeralRunners and pods.
const arcReaper = "system:serviceaccount:ci-infra:arc-reaper"

// TestARCScaleSet runs ARC's real controller and listener (built from its
// source by hack/fleets/arc.sh) against the stand-in Actions service, its
// CRDs installed after runnerguard, and checks each runner's record.
func TestARCScaleSet(t *testing.T) {
	before := runnerguardPods(t)
	f := startARC(t)
	// The runners whose ends are told nowhere: an idle removal, a clean
	// exit, a job's end.
	var quiet []podRef
	ok := t.Run("an idle runner scaled down is an idle removal", func(t *testing.T) { quiet = append(quiet, arcIdle(t, f)) })
	ok = t.Run("a job that ends is the runner's clean exit, the job named", func(t *testing.T) { quiet = append(quiet, arcJob(t, f)) }) && ok
	ok = t.Run("a reaper's EphemeralRunner delete of a busy runner is not the death's cause", func(t *testing.T) { quiet = append(quiet, arcRace(t, f)) }) && ok
	ok = t.Run("an OOM of the runner container is cgroup-oom, the job named, told on its commit", func(t *testing.T) { arcOOM(t, f) }) && ok
	spotTold := 0
	ok = t.Run("a runner ARC re-created with its spent configuration is a zombie, let go and recorded", func(t *testing.T) { spotTold = arcSpentConfig(t, f) }) && ok
	// Last: ARC gives the runner a new pod, which never gets a job.
	ok = t.Run("a busy runner deleted through the override is told on its commit", func(t *testing.T) { arcOverride(t, f) }) && ok
	// The drain cordons the suite's one node while it runs.
	ok = t.Run("a busy runner ended by a drain's deadline is told on its commit as neutral", func(t *testing.T) { arcDrain(t, f) }) && ok
	t.Run("runnerguard read ARC's runners with no restart", func(t *testing.T) {
		assert.Equal(t, before, runnerguardPods(t), "the same runnerguard pods, never restarted")
	})
	t.Run("a death is told once, a runner's normal end never", func(t *testing.T) {
		for _, pod := range quiet {
			assert.Empty(t, reportsOnRecord(t, pod), "%s's end is told nowhere", pod.name)
		}
		assert.Len(t, githubAPI.CheckRuns(), 3+spotTold, "the OOM's, the override's and the drain's check runs (and the spot pod's death, if told), no other")
		assert.Empty(t, githubAPI.Errors(), "requests outside GitHub's published shapes")
	})
	t.Run("deaths counts deaths, job ends and idle removals apart", func(t *testing.T) {
		if !ok {
			t.Log("a case failed: its record may be missing from the counts")
		}
		// Idle removals: at least the idle case's. Under load the listener
		// may scale an extra runner up and down between cases (a run on
		// 2026-11-28 had two).
		// The spent-config case adds two: the spot pod's, and its zombie's end.
		assert.Regexp(t, `^5 runner deaths, 2 job ends and [1-9][0-9]* idle removals? on record\n`, runnerguardDeaths(t, f.ns))
	})
}

// runnerguardPods names runnerguard's pods with their restart counts.
func runnerguardPods(t *testing.T) map[types.UID]int32 {
	t.Helper()
	list := &corev1.PodList{}
	require.NoError(t, admin.List(context.Background(), list, client.InNamespace(releaseNamespace)))
	out := map[types.UID]int32{}
	for _, p := range list.Items {
		for _, s := range p.Status.ContainerStatuses {
			out[p.UID] += s.RestartCount
		}
	}
	return out
}

// oneRecord waits for the pod to go and returns its one record.
func oneRecord(t *testing.T, pod podRef) death.Record {
	t.Helper()
	gone(t, pod)
	recs := deathRecords(t, pod)
	require.Len(t, recs, 1, "one record for the pod")
	return recs[0]
}

func arcIdle(t *testing.T, f *arcFleet) podRef {
	// A held job scales the set up; its cancel before any runner took it
	// leaves the runner idle, and the listener scales it down.
	f.svc.Queue(actionsapi.Job{RequestID: 101, ID: "job-101", Name: "held", Script: "true", Hold: true})
	name := f.registeredRunner(t)
	pod := f.runnerPod(t, name)
	f.marked(t, pod, false)
	require.NoError(t, f.svc.Cancel(101))
	r := oneRecord(t, pod)
	assert.Equal(t, string(death.IdleRemoved), r.Class, r.ClassBasis)
	assert.Equal(t, string(runnerpod.RuleIdle), r.DeleteRule)
	assert.Equal(t, f.controller, r.DeletedBy, "ARC's own delete from its finalizer")
	assert.Equal(t, f.controller, r.StartedBy, "ARC's scale-down started it")
	assert.Nil(t, r.Job, "the runner never had a job")
	assert.Nil(t, r.JobStartedAt)
	return pod
}

func arcJob(t *testing.T, f *arcFleet) podRef {
	f.svc.Queue(actionsapi.Job{RequestID: 102, ID: "job-102", Name: "build", Script: "echo building; sleep 20"})
	name := f.jobRunner(t, 102)
	pod := f.runnerPod(t, name)
	// ARC's CRD came after runnerguard: its leader reads the runner's
	// EphemeralRunner all the same, so the busy runner is marked and its
	// job's start stamped.
	f.marked(t, pod, true)
	r := oneRecord(t, pod)
	assert.Equal(t, string(death.CleanExit), r.Class, r.ClassBasis)
	assertARCJob(t, r, "job-102", "102")
	assert.Empty(t, r.DeletedBy, "the runner's own exit: ARC's delete of the ended pod is never reviewed")
	state, result := f.svc.Result(102)
	assert.Equal(t, "completed/succeeded", state+"/"+result)
	return pod
}

func arcRace(t *testing.T, f *arcFleet) podRef {
	// The runner lingers after its job (as GitHub's runner does, uploading
	// its logs), so ARC's finalizer deletes a running pod once the
	// service lets the runner go.
	f.svc.Queue(actionsapi.Job{RequestID: 103, ID: "job-103", Name: "test", Script: "sleep 20", Linger: time.Minute})
	name := f.jobRunner(t, 103)
	pod := f.runnerPod(t, name)
	f.marked(t, pod, true)
	er := f.ephemeralRunner(t, name)
	require.NoError(t, asClient(t, arcReaper).Delete(context.Background(), er), "an EphemeralRunner's delete is never refused")
	err := as(t, arcReaper).CoreV1().Pods(f.ns).Delete(context.Background(), pod.name, deleteOptions())
	require.True(t, isForbidden(err), "the reaper's delete of the busy pod is refused: %v", err)
	require.Eventually(t, func() bool { return f.svc.Refused() > 0 }, 2*time.Minute, 250*time.Millisecond,
		"ARC's finalizer told the job still runs")
	r := oneRecord(t, pod)
	assert.Equal(t, string(death.JobEnded), r.Class, r.ClassBasis)
	assert.Equal(t, f.controller, r.DeletedBy, "ARC's finalizer deleted the pod, not the reaper")
	assert.Equal(t, string(runnerpod.RuleJobOver), r.DeleteRule)
	assert.Equal(t, arcReaper, r.StartedBy, "the reaper started it")
	assertARCJob(t, r, "job-103", "103")
	if assert.NotNil(t, r.Refusals, "the reaper's refusal is on the record") {
		assert.Contains(t, refusalRequesters(r), arcReaper)
	}
	return pod
}

func arcOOM(t *testing.T, f *arcFleet) {
	f.svc.Queue(actionsapi.Job{RequestID: 104, ID: "job-104", Name: "oom", Script: "dd if=/dev/zero of=/dev/null bs=200M count=1"})
	name := f.jobRunner(t, 104)
	pod := f.runnerPod(t, name)
	require.Eventually(t, func() bool {
		p := &corev1.Pod{}
		return admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, p) != nil || p.Status.Phase == corev1.PodFailed
	}, 3*time.Minute, 250*time.Millisecond, "the runner pod to fail")
	// GitHub fails the job of a runner that stopped answering.
	_ = f.svc.RunnerLost(name)
	r := oneRecord(t, pod)
	assert.Equal(t, string(death.CgroupOOM), r.Class, r.ClassBasis)
	assertARCJob(t, r, "job-104", "104")
	if assert.NotNil(t, r.Vitals) && assert.NotNil(t, r.Vitals.Limit) {
		assert.Equal(t, int64(96<<20), *r.Vitals.Limit, "the runner container's own limit")
	}
	assertGitHubReport(t, pod, 104, "Runner OOM-killed")
}

// assertARCJob: the record names the job after ARC deleted its
// EphemeralRunner, and the job's start is its assignment, after the
// runner's start.
func assertARCJob(t *testing.T, r death.Record, id, requestID string) {
	t.Helper()
	if assert.NotNil(t, r.Job, "the job named") {
		assert.Equal(t, id, r.Job.ID)
		assert.Equal(t, requestID, r.Job.RequestID)
	}
	if assert.NotNil(t, r.JobStartedAt, "the job's start") && assert.NotNil(t, r.StartedAt) {
		assert.False(t, r.JobStartedAt.Before(r.StartedAt), "the job began %v, after the runner %v", r.JobStartedAt, r.StartedAt)
		if r.FinishedAt != nil {
			assert.False(t, r.FinishedAt.Before(r.JobStartedAt), "the job began before the runner ended")
		}
	}
}

func refusalRequesters(r death.Record) []string {
	var out []string
	for _, e := range r.Refusals.Entries {
		out = append(out, e.By)
	}
	return out
}

// registeredRunner waits for an EphemeralRunner registered with the
// service (status.runnerId set) and names it.
func (f *arcFleet) registeredRunner(t *testing.T) string {
	t.Helper()
	var name string
	require.Eventually(t, func() bool {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("actions.github.com/v1alpha1")
		list.SetKind("EphemeralRunnerList")
		if admin.List(context.Background(), list, client.InNamespace(f.ns)) != nil {
			return false
		}
		for _, er := range list.Items {
			if id, _, _ := unstructured.NestedInt64(er.Object, "status", "runnerId"); id != 0 && er.GetDeletionTimestamp() == nil {
				name = er.GetName()
				return true
			}
		}
		return false
	}, 4*time.Minute, 250*time.Millisecond, "a registered runner")
	return name
}

func (f *arcFleet) ephemeralRunner(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	er := &unstructured.Unstructured{}
	er.SetAPIVersion("actions.github.com/v1alpha1")
	er.SetKind("EphemeralRunner")
	require.NoError(t, admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, er))
	return er
}

// marked waits for runnerguard's marks of a busy or an idle runner: a busy
// one keeps its node (do-not-disrupt, safe-to-evict "false") and has its
// job's start stamped; an idle one may go.
func (f *arcFleet) marked(t *testing.T, pod podRef, busy bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		p := &corev1.Pod{}
		if admin.Get(context.Background(), client.ObjectKey{Namespace: pod.namespace, Name: pod.name}, p) != nil {
			return false
		}
		a := p.Annotations
		if busy {
			return a[runnerpod.KarpenterDoNotDisrupt] != "" && a[runnerpod.ClusterAutoscalerSafeEvict] == "false" && a[runnerpod.JobAssignedAt] != ""
		}
		return a[runnerpod.KarpenterDoNotDisrupt] == "" && a[runnerpod.ClusterAutoscalerSafeEvict] == "true"
	}, time.Minute, 250*time.Millisecond, "runnerguard's marks of %s (busy %v)", pod.name, busy)
}

// asClient is a controller-runtime client acting as user.
func asClient(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := *adminCfg
	cfg.Impersonate.UserName = user
	cfg.Impersonate.Groups = []string{"system:masters", "system:authenticated"}
	c, err := client.New(&cfg, client.Options{Scheme: admin.Scheme()})
	require.NoError(t, err)
	return c
}

// oncall is an operator who ends a busy runner on purpose, as
// docs/concepts/guard.md says a deliberate drain is done: granted the
// override (the chart's ClusterRole runnerguard-override) and the pods'
// get, patch and delete in the runners' namespace, and nothing else.
const oncall = "oncall@fleet.example"

// arcOverride: the on-call's delete of a busy runner is refused until they
// write the override on its pod; then it goes, and the death is told on the
// workflow run's head commit, naming who deleted it under which rule.
func arcOverride(t *testing.T, f *arcFleet) {
	ctx := context.Background()
	f.svc.Queue(actionsapi.Job{RequestID: 105, ID: "31885502105", Name: "deploy", Script: "echo deploying; sleep 600"})
	name := f.jobRunner(t, 105)
	pod := f.runnerPod(t, name)
	f.marked(t, pod, true)
	grantOverride(t, f.ns, oncall)
	pods := asUser(t, oncall).CoreV1().Pods(f.ns)
	err := pods.Delete(ctx, pod.name, deleteOptions())
	require.True(t, isForbidden(err), "a busy runner's delete without the override is refused: %v", err)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, runnerpod.AllowDelete, "deploy job wedged; rerun it")
	_, err = pods.Patch(ctx, pod.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	require.NoError(t, err, "the on-call writes the override")
	require.NoError(t, pods.Delete(ctx, pod.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.uid}}),
		"the delete goes through the override")
	// GitHub fails the job of a runner that stopped answering.
	_ = f.svc.RunnerLost(name)
	r := oneRecord(t, pod)
	// The runner script ends on the delete's SIGTERM (sigterm); a runner
	// gone before the kubelet reported its end is deleted-running.
	assert.Contains(t, []string{string(death.SigTerm), string(death.DeletedRunning)}, r.Class, r.ClassBasis)
	assert.Equal(t, oncall, r.DeletedBy)
	assert.Equal(t, string(runnerpod.RuleOverride), r.DeleteRule)
	assertARCJob(t, r, "31885502105", "105")
	cr := assertGitHubReport(t, pod, 105, "Job ended on purpose: its runner's pod was deleted with the override")
	assert.Equal(t, "neutral", cr.Conclusion, "a runner ended on purpose is information: a passing re-run leaves the commit green")
	assert.Contains(t, cr.Output.Summary, "requested by "+notify.Withheld+" (allowed: override)", "the summary says the rule, not who deleted the runner")
	assert.NotContains(t, cr.Output.Summary, oncall)
	assert.Equal(t, githubAPI.Server.URL+"/"+arcRepository+"/actions/runs/105/job/31885502105", cr.DetailsURL,
		"the details link is the job's page")
}

// arcDrain: `kubectl runnerguard drain NODE --deadline --reason` ends a busy
// runner's job at the deadline (the drain's override, then its eviction),
// and the death is told on the workflow run's head commit as neutral: a
// re-run that passes leaves the commit green.
func arcDrain(t *testing.T, f *arcFleet) {
	f.svc.Queue(actionsapi.Job{RequestID: 106, ID: "31885502106", Name: "release", Script: "echo releasing; sleep 600"})
	name := f.jobRunner(t, 106)
	pod := f.runnerPod(t, name)
	f.marked(t, pod, true)
	node := runnerguardDrain(t, pod.namespace, pod.name, "node pool upgrade")
	// GitHub fails the job of a runner that stopped answering.
	_ = f.svc.RunnerLost(name)
	r := oneRecord(t, pod)
	// Evicted (its SIGTERM) while its node was cordoned.
	assert.Equal(t, string(death.NodeDisrupted), r.Class, r.ClassBasis)
	assert.True(t, r.Deleted, "the eviction ended the runner")
	assert.Equal(t, string(runnerpod.RuleOverride), r.DeleteRule, "the drain ends a job by the override")
	assert.Contains(t, r.DeleteReason, drainReason("node pool upgrade", node))
	assertARCJob(t, r, "31885502106", "106")
	cr := assertGitHubReport(t, pod, 106, "Job ended on purpose")
	assert.Equal(t, "neutral", cr.Conclusion, "a runner ended on purpose is information: a passing re-run leaves the commit green")
	assert.NotContains(t, cr.Output.Summary, node, "the node is withheld")
	assert.NotContains(t, cr.Output.Title+cr.Output.Summary, "node pool upgrade (runnerguard drain", "the override's reason names who drained: withheld")
}

// grantOverride lets user, in ns, read, patch and delete pods (a Role of
// its own) and override (the chart's ClusterRole).
func grantOverride(t *testing.T, ns, user string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "oncall-pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "patch", "delete"}}}}))
	for kind, role := range map[string]string{"Role": "oncall-pods", "ClusterRole": nodecluster.ReleaseName + "-override"} {
		require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "oncall-" + strings.TrimPrefix(role, "oncall-")},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}))
	}
}

// asUser is a clientset acting as user with only the groups every
// authenticated user has: the API server's authorizer decides what it may.
func asUser(t *testing.T, user string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}
