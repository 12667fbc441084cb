//go:build node

package node

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/death"
	rgdrain "github.com/runnerguard/runnerguard/internal/drain"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// rgDrain runs `runnerguard drain` on the node for the pods of ns (the
// webhook's own pods run on this one node too and would have nowhere to
// go), keeps its output in e2e/.artifacts, and uncordons the node after
// the test.
func rgDrain(t *testing.T, ns string, args ...string) (string, int) {
	t.Helper()
	t.Cleanup(func() {
		if out, err := exec.Command(kubectlBin, "--kubeconfig="+kubeconfigPath, "uncordon", nodeName).CombinedOutput(); err != nil {
			t.Errorf("uncordon: %v: %s", err, out)
		}
	})
	bin, err := whyBin()
	require.NoError(t, err)
	args = append([]string{"drain", nodeName, "--kubeconfig=" + kubeconfigPath, "--pod-selector=" + runnerLabel + "=" + ns, "--ignore-daemonsets"}, args...)
	var out bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err = cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else {
		require.NoError(t, err)
	}
	text := out.String()
	t.Logf("runnerguard %s (%s): exit %d\n%s", strings.Join(args, " "), time.Since(start).Round(time.Millisecond), code, text)
	dir, err := apitest.Artifacts()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "drain-"+t.Name()+".txt"), []byte(text), 0o644))
	return text, code
}

// ensureEphemeralRunnerCRD installs ARC's EphemeralRunner CRD (the shape
// the guard reads) if the cluster has none.
func ensureEphemeralRunnerCRD(t *testing.T) {
	t.Helper()
	s := runtime.NewScheme()
	require.NoError(t, apiextensionsv1.AddToScheme(s))
	c, err := client.New(adminCfg, client.Options{Scheme: s})
	require.NoError(t, err)
	if err := c.Create(context.Background(), apitest.EphemeralRunnerCRD()); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool {
		return admin.List(context.Background(), &metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{
			APIVersion: arcscaleset.Group + "/v1alpha1", Kind: arcscaleset.Kind + "List"}}) == nil
	}, 30*time.Second, 250*time.Millisecond, "the EphemeralRunner API served")
}

// arcRunner starts an ARC scale-set shaped runner: its EphemeralRunner
// (with a job when busy) and its pod, whose runner runs the stand-in with
// args.
func arcRunner(t *testing.T, ns, name string, busy bool, args ...string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	er := apitest.EphemeralRunner(ns, name)
	require.NoError(t, admin.Create(ctx, er))
	t.Cleanup(func() {
		_ = admin.Patch(ctx, er.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	})
	if busy {
		patch := []byte(`{"status":{"jobRequestId":7,"jobId":"job-` + name + `","jobRepositoryName":"acme/api"}}`)
		require.NoError(t, admin.Status().Patch(ctx, er.DeepCopy(), client.RawPatch(types.MergePatchType, patch)))
	}
	p := podtest.ARCScaleSet(ns, name).Obj()
	p.UID = ""
	p.Labels[runnerLabel] = ns
	p.OwnerReferences[0].UID = er.GetUID()
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	for i := range p.Spec.InitContainers {
		c := &p.Spec.InitContainers[i]
		c.Image, c.ImagePullPolicy, c.Args = runnerImage, corev1.PullNever, []string{"job", "0"}
		if c.RestartPolicy != nil { // dind, a native sidecar: runs as long as the pod
			c.Args = []string{"job", "3600"}
		}
	}
	c := &p.Spec.Containers[0]
	c.Image, c.ImagePullPolicy, c.Args = runnerImage, corev1.PullNever, args
	return start(t, p)
}

// webDeployment is a non-runner Deployment whose one pod runs on the node.
func webDeployment(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{runnerLabel: ns, "app": "web"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](2),
			Containers:                    []corev1.Container{{Name: "web", Image: runnerImage, ImagePullPolicy: corev1.PullNever, Args: []string{"job", "3600"}}},
		}},
	}}
	require.NoError(t, admin.Create(ctx, d))
	var pod *corev1.Pod
	require.Eventually(t, func() bool {
		list := &corev1.PodList{}
		if admin.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": "web"}) != nil {
			return false
		}
		for i := range list.Items {
			if list.Items[i].Status.Phase == corev1.PodRunning {
				pod = &list.Items[i]
				return true
			}
		}
		return false
	}, 90*time.Second, 500*time.Millisecond, "the Deployment's pod running")
	return pod
}

func TestRunnerguardDrainLetsIdleRunnersGoFirstAndCompletesWhenTheLastJobEnds(t *testing.T) {
	ensureEphemeralRunnerCRD(t)
	ns := newNamespace(t)
	idle := arcRunner(t, ns, "arc-idle", false, "job", "3600")
	// runnerguard reads EphemeralRunners once it sees ARC's CRD served (it
	// looks again at intervals); until then it takes an ARC runner to be
	// busy and holds it by its budget. The drain's order is asserted from
	// the moment runnerguard judged the idle runner idle, and the busy
	// runner's job starts then.
	waitPod(t, idle, "runnerguard to judge the idle runner idle", 90*time.Second, func(p *corev1.Pod) bool {
		return p.Annotations[runnerpod.ClusterAutoscalerSafeEvict] == "true"
	})
	busy := arcRunner(t, ns, "arc-busy", true, "job", "20")
	build := startBuild(t, buildPod(ns, "build"))
	web := webDeployment(t, ns)
	manager := as(t, gitlabManager)
	go func() {
		// GitLab's manager ends the build's job by deleting its pod, once
		// the drain, having let the idle runner go, waits for the jobs.
		for ctx := context.Background(); ; time.Sleep(500 * time.Millisecond) {
			if apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(idle), &corev1.Pod{})) {
				_ = manager.Delete(ctx, build)
				return
			}
		}
	}()

	out, code := rgDrain(t, ns, "--timeout=3m")
	require.Equal(t, rgdrain.ExitDrained, code, "drained when the last job ended")
	for _, p := range []*corev1.Pod{idle, busy, build, web} {
		assert.True(t, gone(t, p), "%s gone", p.Name)
	}
	for _, want := range []string{"evicting pod " + ns + "/arc-idle (arc-scale-set): the EphemeralRunner has no job assigned",
		"waiting for " + ns + "/arc-busy: arc-scale-set, job acme/api#job-arc-busy", "waiting for " + ns + "/build: gitlab", "evicting pod " + ns + "/" + web.Name} {
		assert.Contains(t, out, want)
	}
	assert.Less(t, strings.Index(out, "evicting pod "+ns+"/arc-idle"), strings.Index(out, "evicting pod "+ns+"/arc-busy"), "the idle runner went first")
	// The busy runner's job ended by itself (exit 0) before its pod went.
	recs := waitRecords(t, busy)
	assert.Equal(t, string(death.CleanExit), recs[0].Class)
}

func TestRunnerguardDrainEndsTheRemainingJobsAtTheDeadlineOnRecord(t *testing.T) {
	ensureEphemeralRunnerCRD(t)
	ns := newNamespace(t)
	busy := arcRunner(t, ns, "arc-busy", true, "job", "3600")
	build := startBuild(t, buildPod(ns, "build"))

	out, code := rgDrain(t, ns, "--deadline=10s", "--reason=e2e node pool upgrade", "--timeout=2m")
	require.Equal(t, rgdrain.ExitDrained, code, "drained: the jobs the deadline ended are an outcome, said in the output")
	assert.Contains(t, out, "the deadline ended 2 job(s)")
	assert.Contains(t, out, "deadline reached: ending "+ns+"/arc-busy")
	assert.Contains(t, out, "deadline reached: ending "+ns+"/build")
	for _, p := range []*corev1.Pod{busy, build} {
		recs := waitRecords(t, p)
		assert.Equal(t, "override", recs[0].DeleteRule, p.Name)
		assert.NotEmpty(t, recs[0].DeletedBy, "the record names who drained")
		assert.Contains(t, recs[0].DeleteReason, "e2e node pool upgrade (runnerguard drain of node "+nodeName+" by ", "and why")
		assert.True(t, hasEventNote(t, p, "DeleteOverridden", "e2e node pool upgrade (runnerguard drain of node "+nodeName+" by "), "the reason is said")
	}
}

func TestRunnerguardDrainDryRunTimeoutAndRefusal(t *testing.T) {
	ensureEphemeralRunnerCRD(t)
	ns := newNamespace(t)
	busy := arcRunner(t, ns, "arc-busy", true, "job", "3600")

	out, code := rgDrain(t, ns, "--dry-run", "--deadline=1h", "--reason=upgrade")
	require.Equal(t, rgdrain.ExitDrained, code)
	assert.Contains(t, out, "dry run: nothing was changed")
	n := &corev1.Node{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKey{Name: nodeName}, n))
	assert.False(t, n.Spec.Unschedulable, "the dry run did not cordon")
	assert.False(t, gone(t, busy))

	_, code = rgDrain(t, ns, "--as=e2e-nobody", "--deadline=1h", "--reason=upgrade")
	assert.Equal(t, rgdrain.ExitRefused, code, "a principal without the permissions is refused")
	require.NoError(t, admin.Get(context.Background(), client.ObjectKey{Name: nodeName}, n))
	assert.False(t, n.Spec.Unschedulable, "and nothing changed")

	_, code = rgDrain(t, ns, "--timeout=5s")
	assert.Equal(t, rgdrain.ExitTimeout, code, "the busy runner outlasted --timeout")
	assert.False(t, gone(t, busy))
}

func waitRecords(t *testing.T, pod *corev1.Pod) []death.Record {
	t.Helper()
	var recs []death.Record
	require.Eventually(t, func() bool { recs = deathRecords(t, pod); return len(recs) > 0 }, 60*time.Second, 500*time.Millisecond, "the record of "+pod.Name)
	return recs
}

func hasEventNote(t *testing.T, pod *corev1.Pod, reason, note string) bool {
	t.Helper()
	for _, e := range podEvents(t, pod) {
		if e.Reason == reason && strings.Contains(e.Note, note) {
			return true
		}
	}
	return false
}
