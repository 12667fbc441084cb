//go:build e2e

package api

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The drain's user: the admin kubeconfig's.
const operator = "operator"

// drainNode is a Node for a drain test, with a stand-in for its kubelet:
// a pod whose deletion began has its running containers ended (SIGTERM's
// exit 143) and is then removed, as the kubelet does.
func drainNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n := node(t, name)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", name).String()})
			if err == nil {
				for i := range pods.Items {
					if p := &pods.Items[i]; p.DeletionTimestamp != nil {
						stopContainers(ctx, p)
						forceRemove(p)
					}
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { stop(); <-done })
	return n
}

func stopContainers(ctx context.Context, p *corev1.Pod) {
	now := metav1.Now()
	changed := false
	for i := range p.Status.ContainerStatuses {
		s := &p.Status.ContainerStatuses[i]
		if run := s.State.Running; run != nil {
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143, Reason: "Error", StartedAt: run.StartedAt, FinishedAt: now}}
			changed = true
		}
	}
	if changed {
		_ = admin.Status().Update(ctx, p)
	}
}

// runDrain runs `runnerguard drain` with the admin's kubeconfig and args,
// returning its output and exit code.
func runDrain(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := runCLI(t, []string{"KUBECONFIG=" + adminKubeconfig}, append([]string{"drain", "--interval=200ms"}, args...)...)
	t.Logf("runnerguard drain %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	return out + errOut, code
}

// startDrain starts `runnerguard drain` in the background; wait returns
// its output and exit code, said what it has written so far.
func startDrain(t *testing.T, args ...string) (wait func() (string, int), said func() string) {
	t.Helper()
	cmd := exec.Command(server.Binary(), append([]string{"drain", "--interval=200ms"}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+adminKubeconfig)
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return func() (string, int) {
		err := cmd.Wait()
		code := 0
		if exit, ok := err.(*exec.ExitError); ok {
			code = exit.ExitCode()
		} else {
			require.NoError(t, err)
		}
		t.Logf("runnerguard drain %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		return out.String(), code
	}, out.String
}

func gone(t *testing.T, pod *corev1.Pod) bool {
	t.Helper()
	err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), &corev1.Pod{})
	return apierrors.IsNotFound(err)
}

func cordoned(t *testing.T, node string) bool {
	t.Helper()
	n := &corev1.Node{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKey{Name: node}, n))
	return n.Spec.Unschedulable
}

// idleARCRunnerOn is an ARC scale-set runner on node whose EphemeralRunner
// has no job.
func idleARCRunnerOn(t *testing.T, ns, name, node string) *corev1.Pod {
	t.Helper()
	er := apitest.EphemeralRunner(ns, name)
	require.NoError(t, as(t, arcController).Create(context.Background(), er))
	w := podtest.ARCScaleSet(ns, name).Node(node).RunningSince("runner", time.Now().Add(-time.Minute))
	w.OwnerReferences[0].UID = er.GetUID()
	return create(t, as(t, arcController), w.Obj())
}

// busyGitLabOn is a GitLab build pod on node whose build runs job 5521 of
// project 42.
func busyGitLabOn(ns, name, node string) *corev1.Pod {
	return podtest.GitLab(ns, name).Node(node).RunningSince("build", time.Now().Add(-2*time.Minute)).
		Annotate(gitlab.JobIDAnnotation, "5521").Label(gitlab.ProjectIDLabel, "42").Obj()
}

func TestDrainEvictsIdleRunnersAtOnceAndWaitsForTheBusyOnes(t *testing.T) {
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-drain-wait")
	idle := idleARCRunnerOn(t, ns, "idle", n.Name)
	fresh := create(t, nil, podtest.Runner(ns, "fresh").Node(n.Name).Obj())
	web := create(t, nil, podtest.Plain(ns, "web").Node(n.Name).Obj())
	busy := create(t, nil, podtest.Runner(ns, "busy").Node(n.Name).RunningSince("runner", time.Now().Add(-3*time.Minute)).Obj())
	build := create(t, nil, busyGitLabOn(ns, "build", n.Name))

	wait, said := startDrain(t, n.Name, "--force", "--timeout=2m")
	eventually(t, func() bool { return gone(t, idle) && gone(t, fresh) && gone(t, web) }, "the idle and never-started runners and the other pod go at once")
	assert.True(t, cordoned(t, n.Name))
	// The drain says it waits for the busy runners, and they are there.
	eventually(t, func() bool {
		return strings.Contains(said(), "waiting for "+ns+"/busy") && strings.Contains(said(), "waiting for "+ns+"/build")
	}, "the drain waits for the busy runners")
	assert.True(t, alive(t, busy) && alive(t, build), "busy runners are waited for")

	// The jobs end: the runners exit, and the drain lets them go.
	for _, p := range []*corev1.Pod{busy, build} {
		got := &corev1.Pod{}
		require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(p), got))
		stopContainers(context.Background(), got)
	}
	out, code := wait()
	assert.Equal(t, drain.ExitDrained, code, "drained, no job ended")
	assert.True(t, gone(t, busy) && gone(t, build))
	for _, want := range []string{
		"runnerguard: every preset's defaults: the installation's ConfigMap runnerguard/runnerguard could not be read (NotFound)",
		"node/" + n.Name + " cordoned",
		"evicting pod " + ns + "/idle (arc-scale-set): the EphemeralRunner has no job assigned",
		"evicting pod " + ns + "/fresh (generic): the runner has not started",
		"evicting pod " + ns + "/web",
		"waiting for " + ns + "/busy: generic, job -, running for 3m",
		"waiting for " + ns + "/build: gitlab, job 42#5521, running for 2m",
		"drained",
	} {
		assert.Contains(t, out, want)
	}
	assert.Less(t, strings.Index(out, "evicting pod "+ns+"/idle"), strings.Index(out, "evicting pod "+ns+"/busy"), "idle runners go first")
}

func TestDrainEndsTheJobsStillRunningAtTheDeadlineThroughTheOverride(t *testing.T) {
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-drain-deadline")
	busy := create(t, nil, podtest.Runner(ns, "busy").Node(n.Name).RunningSince("runner", time.Now().Add(-3*time.Minute)).Obj())

	out, code := runDrain(t, n.Name, "--deadline=2s", "--reason=node pool upgrade", "--timeout=1m")
	require.Equal(t, drain.ExitDrained, code, "drained: the job the deadline ended is an outcome, said in the output")
	reason := "node pool upgrade (runnerguard drain of node " + n.Name + " by " + operator + ")"
	assert.Contains(t, out, "deadline reached: ending "+ns+"/busy (generic, job -): runnerguard.io/allow-delete=\""+reason+"\"")
	assert.Contains(t, out, "the deadline ended 1 job(s)")
	assert.Contains(t, out, "Warning: runnerguard: deleting a busy runner pod")
	assert.NotContains(t, out, "error:", "an ended job is an outcome, not an error")
	assert.True(t, gone(t, busy))
	r := oneDeath(t, busy)
	assert.Equal(t, operator, r.DeletedBy, "the record names who drained")
	assert.Equal(t, "override", r.DeleteRule)
	assert.Equal(t, reason, r.DeleteReason, "and the reason, with who drained which node")
	eventually(t, hasEvent(t, busy, corev1.EventTypeNormal, "DeleteOverridden", reason), "the override's Event carries the reason")
}

func TestADrainDryRunChangesNothing(t *testing.T) {
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-drain-dry")
	idle := idleARCRunnerOn(t, ns, "idle", n.Name)
	busy := create(t, nil, podtest.Runner(ns, "busy").Node(n.Name).RunningSince("runner", time.Now().Add(-time.Minute)).Obj())

	out, code := runDrain(t, n.Name, "--dry-run", "--deadline=1h", "--reason=upgrade")
	require.Equal(t, drain.ExitDrained, code)
	assert.False(t, cordoned(t, n.Name))
	assert.True(t, alive(t, idle) && alive(t, busy))
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(busy), got))
	assert.NotContains(t, got.Annotations, runnerpod.AllowDelete)
	for _, want := range []string{"would cordon node " + n.Name, "would evict now: " + ns + "/idle (arc-scale-set)",
		"would wait for its job: waiting for " + ns + "/busy", "would set runnerguard.io/allow-delete=", "dry run: nothing was changed"} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, "the API server would", "a client dry run asks the API server nothing")

	// A server dry run has the API server (the guard, the budgets) judge
	// each eviction it would make now, and still changes nothing.
	out, code = runDrain(t, n.Name, "--dry-run=server")
	require.Equal(t, drain.ExitDrained, code, out)
	assert.Contains(t, out, "would evict now: "+ns+"/idle (arc-scale-set): ")
	assert.Regexp(t, `would evict now: `+ns+`/idle \(arc-scale-set\): [^\n]*; the API server would allow it now`, out)
	assert.False(t, cordoned(t, n.Name))
	assert.True(t, alive(t, idle) && alive(t, busy))

	_, code = runDrain(t, n.Name, "--dry-run=maybe")
	assert.Equal(t, 2, code, "a dry-run strategy kubectl does not know is a usage error")
}

func TestADrainThatTimesOutLeavesTheBusyRunnerAndTheNodeCordoned(t *testing.T) {
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-drain-timeout")
	busy := create(t, nil, podtest.Runner(ns, "busy").Node(n.Name).RunningSince("runner", time.Now().Add(-time.Minute)).Obj())

	out, code := runDrain(t, n.Name, "--timeout=3s")
	assert.Equal(t, drain.ExitTimeout, code)
	assert.Contains(t, out, "--timeout passed with pods still on the nodes")
	assert.True(t, alive(t, busy))
	assert.True(t, cordoned(t, n.Name))
}

func TestADrainIsRefusedWithNothingChangedWhenKubectlsRulesRefuseAPod(t *testing.T) {
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-drain-unmanaged")
	web := create(t, nil, podtest.Plain(ns, "web").Node(n.Name).Obj())

	out, code := runDrain(t, n.Name)
	assert.Equal(t, drain.ExitRefused, code)
	assert.Contains(t, out, "refused by kubectl drain's rules for node "+n.Name+"'s other pods: cannot delete Pods that declare no controller (use --force to override): "+ns+"/web")
	assert.False(t, cordoned(t, n.Name))
	assert.True(t, alive(t, web))
}

// drainer is a ClusterRole with what kubectl drain needs, and no override.
const drainer = "e2e-drainer"

func TestADrainerWithoutTheOverrideIsToldWhatItLacksAndNothingChanges(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-drain-refused")
	busy := create(t, nil, podtest.Runner(ns, "busy").Node(n.Name).RunningSince("runner", time.Now().Add(-time.Minute)).Obj())
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: drainer}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	}}
	if err := admin.Create(ctx, role); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: drainer + "-"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: drainer},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob@example.com"}}}
	require.NoError(t, admin.Create(ctx, crb))
	t.Cleanup(func() { _ = admin.Delete(ctx, crb) })
	eventually(t, func() bool {
		_, code := runDrain(t, n.Name, "--dry-run", "--as=bob@example.com")
		return code == drain.ExitDrained
	}, "RBAC lets bob drain")

	out, code := runDrain(t, n.Name, "--deadline=1m", "--reason=upgrade", "--as=bob@example.com")
	assert.Equal(t, drain.ExitRefused, code)
	assert.Contains(t, out, "refused: you may not override runners.runnerguard.io in namespace "+ns+" (the override, which the ClusterRole runnerguard-override grants in a default install")
	assert.NotContains(t, out, "you may not create pods/eviction", "only what is missing is named")
	assert.False(t, cordoned(t, n.Name), "nothing changed")
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(busy), got))
	assert.NotContains(t, got.Annotations, runnerpod.AllowDelete)
}

// setDeadline patches node's drain deadline (and its setter, when by is
// not "") as c.
func setDeadline(c client.Client, node string, at time.Time, by string) error {
	ann := map[string]any{runnerpod.DrainDeadline: at.UTC().Format(time.RFC3339)}
	if by != "" {
		ann[runnerpod.DrainDeadlineBy] = by
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	return c.Patch(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, patch))
}

func TestANodesDrainDeadlineIsSetOnlyByWhoItNamesAndNeverByAKubelet(t *testing.T) {
	n := drainNode(t, "e2e-drain-annotation")
	at := time.Now().Add(time.Hour)
	kubelet := principal{"system:node:" + n.Name, []string{"system:nodes", "system:masters", "system:authenticated"}}.client(t)
	alice := as(t, "alice@example.com")

	err := setDeadline(kubelet, n.Name, at, "system:node:"+n.Name)
	require.Error(t, err, "a node's kubelet may not free its runners")
	assert.Contains(t, err.Error(), "a node's kubelet (group system:nodes) may not set or change runnerguard.io/drain-deadline")
	err = setDeadline(alice, n.Name, at, "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set runnerguard.io/drain-deadline-by=alice@example.com in the same request")
	err = setDeadline(alice, n.Name, at, "bob@example.com")
	require.Error(t, err, "nobody names someone else")
	require.NoError(t, setDeadline(alice, n.Name, at, "alice@example.com"))

	// Only the setter is named: the kubelet's usual annotation writes,
	// which touch neither key, pass.
	patch := []byte(`{"metadata":{"annotations":{"node.alpha.kubernetes.io/ttl":"0"}}}`)
	require.NoError(t, kubelet.Patch(context.Background(), n.DeepCopy(), client.RawPatch(types.MergePatchType, patch)))
	err = kubelet.Patch(context.Background(), n.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+runnerpod.DrainDeadline+`":null}}}`)))
	require.Error(t, err, "nor may the kubelet remove it")
}

func TestANodesDrainDeadlineLetsABusyRunnerGoOnlyOnceItHasPassed(t *testing.T) {
	ns := newNamespace(t, nil)
	n := drainNode(t, "e2e-drain-node-deadline")
	busy := create(t, nil, podtest.Runner(ns, "busy").Node(n.Name).RunningSince("runner", time.Now().Add(-time.Minute)).Obj())
	alice := as(t, "alice@example.com")
	// An hour ahead: the eviction is surely tried before it, however slow
	// the machine.
	require.NoError(t, setDeadline(alice, n.Name, time.Now().Add(time.Hour), "alice@example.com"))
	err := evict(as(t, reaper), busy, false)
	require.Error(t, err, "before the deadline the busy runner is protected")
	assert.True(t, apierrors.IsTooManyRequests(err), "429, got %v", err)

	// Brought forward to a moment ahead (RFC3339 keeps whole seconds), the
	// platform's drain retries until the guard lets it through: not before
	// the deadline.
	at := time.Now().Add(2 * time.Second).Truncate(time.Second)
	require.NoError(t, setDeadline(alice, n.Name, at, "alice@example.com"))
	eventually(t, func() bool {
		err := evict(as(t, reaper), busy, false)
		require.True(t, err == nil || apierrors.IsTooManyRequests(err), "refused for now or let through; got %v", err)
		return err == nil
	}, "after the deadline the platform's drain passes")
	assert.False(t, time.Now().Before(at), "not before the deadline")

	r := oneDeath(t, busy)
	assert.Equal(t, reaper, r.DeletedBy)
	assert.Equal(t, "node-drain-deadline", r.DeleteRule)
	assert.Equal(t, "alice@example.com", r.StartedBy, "the record names who set the deadline")
	assert.Contains(t, r.Ending(), "once its node's drain deadline (runnerguard.io/drain-deadline) had passed, set by alice@example.com")
	eventually(t, hasEvent(t, busy, corev1.EventTypeNormal, "DrainDeadlinePassed", "set by alice@example.com"), "an Event says why it went")
}
