//go:build fleets

package fleets

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/nodecluster"
	"github.com/runnerguard/runnerguard/internal/fleet/tekton"
)

// Tekton's namespace and controller ServiceAccount, as its release
// manifests (config/) name them, and the images hack/fleets/tekton.sh
// built: the pod's binaries where ko puts them, and busybox as the shell
// image (place-scripts).
const (
	tektonSystem     = "tekton-pipelines"
	tektonController = "tekton-pipelines-controller"
	tektonImage      = "runnerguard.local/e2e/tekton:1"
)

// tektonControllerUser is the controller as the API server names it: the
// creator the injector records and the owner whose delete ends a TaskRun.
var tektonControllerUser = "system:serviceaccount:" + tektonSystem + ":" + tektonController

// tektonReaperSA is the fleet's cleanup worker: a ServiceAccount with edit
// in the TaskRuns' namespace.
const tektonReaperSA = "orphan-reaper"

// tektonFleet is Tekton's controller running against the cluster, and a
// namespace for its TaskRuns.
type tektonFleet struct {
	ns     string
	reaper *kubernetes.Clientset
	log    string
}

// tektonBuilt is Tekton's build (hack/fleets/tekton.sh).
func tektonBuilt(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(nodecluster.EnvOr("FLEETS_TEKTON", filepath.Join("..", "..", ".cache", "fleets", "tekton")))
	require.NoError(t, err)
	for _, f := range []string{"controller", "config"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("Tekton not built (hack/fleets/tekton.sh): %v", err)
		}
	}
	return dir
}

// tektonManifests are the files of Tekton's config/ the controller needs:
// its namespace, ServiceAccounts, RBAC, config maps and CRDs. Left out:
// the webhook's Deployment and webhook configurations, the events
// controller and the resolvers.
func tektonManifests(dir string) ([]string, error) {
	files := []string{"100-namespace/100-namespace.yaml", "200-serviceaccount.yaml", "200-clusterrole.yaml", "200-role.yaml",
		"201-clusterrolebinding.yaml", "201-rolebinding.yaml", "clusterrole-aggregate-edit.yaml", "clusterrole-aggregate-view.yaml"}
	configs, err := filepath.Glob(filepath.Join(dir, "config", "config-*.yaml"))
	if err != nil {
		return nil, err
	}
	crds, err := filepath.Glob(filepath.Join(dir, "config", "300-crds", "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(files)+len(configs)+len(crds))
	for _, f := range files {
		out = append(out, filepath.Join(dir, "config", f))
	}
	return append(append(out, configs...), crds...), nil
}

// installTekton creates Tekton's release objects. Its CRDs name its
// webhook for conversion between v1beta1 and v1; the webhook does not run
// here (the suite only ever reads and writes v1, the storage version), so
// the conversion is dropped: the API server would otherwise call a
// Service that is not there for any v1beta1 request.
func installTekton(t *testing.T, dir string) {
	t.Helper()
	ctx := context.Background()
	files, err := tektonManifests(dir)
	require.NoError(t, err)
	for _, f := range files {
		b, err := os.Open(f)
		require.NoError(t, err)
		dec := utilyaml.NewYAMLOrJSONDecoder(b, 4096)
		for {
			obj := &unstructured.Unstructured{}
			err := dec.Decode(&obj.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			require.NoError(t, err, "decoding %s", f)
			if len(obj.Object) == 0 {
				continue
			}
			if obj.GetKind() == "CustomResourceDefinition" {
				unstructured.RemoveNestedField(obj.Object, "spec", "conversion")
			}
			if err := admin.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				require.NoError(t, err, "creating %s %s from %s", obj.GetKind(), obj.GetName(), f)
			}
		}
		_ = b.Close()
	}
	require.Eventually(t, func() bool {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion("tekton.dev/v1")
		l.SetKind("TaskRunList")
		return admin.List(ctx, l) == nil
	}, time.Minute, 250*time.Millisecond, "Tekton's TaskRun CRD served")
}

// freePort is a loopback port nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// startTektonController runs Tekton's controller on the host as its
// ServiceAccount (a TokenRequest token in a kubeconfig), with the flags
// and environment of its release Deployment (config/controller.yaml), the
// images this suite built. High availability (leader election) is off: one
// replica, and a rerun on the same cluster does not wait out a dead
// replica's leases.
func (f *tektonFleet) startTektonController(t *testing.T, dir string) {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	tok, err := cs.CoreV1().ServiceAccounts(tektonSystem).CreateToken(context.Background(), tektonController, req, metav1.CreateOptions{})
	require.NoError(t, err)
	kc := filepath.Join(t.TempDir(), "controller.kubeconfig")
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, adminCfg.Host, caFile, tok.Status.Token)
	require.NoError(t, os.WriteFile(kc, []byte(conf), 0o600))
	cmd := exec.Command(filepath.Join(dir, "controller"), "-kubeconfig", kc, "-disable-ha",
		"-entrypoint-image", tektonImage, "-nop-image", tektonImage, "-sidecarlogresults-image", tektonImage,
		"-workingdirinit-image", tektonImage, "-shell-image", buildImage,
		"-shell-image-win", "mcr.microsoft.com/powershell:nanoserver")
	cmd.Env = append(os.Environ(), "SYSTEM_NAMESPACE="+tektonSystem, "KUBERNETES_MIN_VERSION=v1.28.0",
		"CONFIG_DEFAULTS_NAME=config-defaults", "CONFIG_LOGGING_NAME=config-logging",
		"CONFIG_OBSERVABILITY_NAME=config-observability", "CONFIG_FEATURE_FLAGS_NAME=feature-flags",
		"CONFIG_LEADERELECTION_NAME=config-leader-election-controller", "CONFIG_SPIRE=config-spire",
		"METRICS_DOMAIN=tekton.dev/pipeline",
		"PROBES_PORT="+freePort(t), "PROFILING_PORT="+freePort(t), "METRICS_PROMETHEUS_PORT="+freePort(t))
	f.log = artifact(t, "tekton-controller.log")
	out, err := os.Create(f.log)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = out, out
	// It goes with the suite, even when the suite is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(f.log)
			t.Logf("Tekton controller log (whole in %s):\n%s", f.log, tail(string(b), 80))
			keepDiagnostics(t, f.ns, "tekton")
		}
	})
}

// tektonReaper makes the reaper's ServiceAccount with edit in ns and
// returns a client with its token.
func tektonReaper(t *testing.T, ns string) *kubernetes.Clientset {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tektonReaperSA}}))
	require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: tektonReaperSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: tektonReaperSA}},
	}))
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, tektonReaperSA, req, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg := rest.AnonymousClientConfig(adminCfg)
	cfg.BearerToken = tok.Status.Token
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

// startTekton installs Tekton (after runnerguard, which runs already) and
// runs its controller, with an opted-in namespace for the TaskRuns.
func startTekton(t *testing.T) *tektonFleet {
	t.Helper()
	dir := tektonBuilt(t)
	installTekton(t, dir)
	f := &tektonFleet{ns: newNamespace(t, true)}
	f.reaper = tektonReaper(t, f.ns)
	f.startTektonController(t, dir)
	t.Cleanup(func() {
		if t.Failed() {
			f.logTaskRuns(t)
		}
	})
	return f
}

// step is one step of a TaskRun's task: a script in busybox, limited to
// 96Mi of memory.
type step struct{ name, script string }

// createTaskRun creates TaskRun name with steps, and timeout when given.
func (f *tektonFleet) createTaskRun(t *testing.T, name string, timeout string, steps ...step) *unstructured.Unstructured {
	t.Helper()
	var ss []any
	for _, s := range steps {
		ss = append(ss, map[string]any{"name": s.name, "image": buildImage, "script": s.script,
			"computeResources": map[string]any{"limits": map[string]any{"memory": "96Mi"}, "requests": map[string]any{"memory": "32Mi"}}})
	}
	spec := map[string]any{"taskSpec": map[string]any{"steps": ss}}
	if timeout != "" {
		spec["timeout"] = timeout
	}
	tr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tekton.dev/v1", "kind": "TaskRun",
		"metadata": map[string]any{"namespace": f.ns, "name": name},
		"spec":     spec,
	}}
	require.NoError(t, admin.Create(context.Background(), tr))
	return tr
}

// taskRun reads TaskRun name.
func (f *tektonFleet) taskRun(name string) (*unstructured.Unstructured, error) {
	tr := &unstructured.Unstructured{}
	tr.SetAPIVersion("tekton.dev/v1")
	tr.SetKind("TaskRun")
	err := admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, tr)
	return tr, err
}

// succeeded is the TaskRun's Succeeded condition: its status and reason.
func succeeded(tr *unstructured.Unstructured) (status, reason string) {
	conds, _, _ := unstructured.NestedSlice(tr.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Succeeded" {
			s, _ := m["status"].(string)
			r, _ := m["reason"].(string)
			return s, r
		}
	}
	return "", ""
}

// taskRunDone waits for TaskRun name to end and returns its reason.
func (f *tektonFleet) taskRunDone(t *testing.T, name string) (status, reason string) {
	t.Helper()
	require.Eventually(t, func() bool {
		tr, err := f.taskRun(name)
		if err != nil {
			return false
		}
		status, reason = succeeded(tr)
		return status == "True" || status == "False"
	}, 4*time.Minute, 500*time.Millisecond, "TaskRun %s to end", name)
	return status, reason
}

// taskRunPod waits for the pod of TaskRun name with step running.
func (f *tektonFleet) taskRunPod(t *testing.T, name, step string) podRef {
	t.Helper()
	var ref podRef
	require.Eventually(t, func() bool {
		tr, err := f.taskRun(name)
		if err != nil {
			return false
		}
		podName, _, _ := unstructured.NestedString(tr.Object, "status", "podName")
		if podName == "" {
			return false
		}
		p := &corev1.Pod{}
		if admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: podName}, p) != nil || p.Status.StartTime == nil {
			return false
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == tekton.StepPrefix+step && s.State.Running != nil {
				ref = podRef{namespace: p.Namespace, name: p.Name, uid: p.UID, startTime: *p.Status.StartTime}
				return true
			}
		}
		return false
	}, 3*time.Minute, 250*time.Millisecond, "TaskRun %s's pod with step %s running (controller log: %s)", name, step, f.log)
	return ref
}

// cancel cancels TaskRun name as a user does (tkn taskrun cancel):
// spec.status TaskRunCancelled.
func (f *tektonFleet) cancel(t *testing.T, name string) {
	t.Helper()
	tr := &unstructured.Unstructured{}
	tr.SetAPIVersion("tekton.dev/v1")
	tr.SetKind("TaskRun")
	tr.SetNamespace(f.ns)
	tr.SetName(name)
	patch := []byte(`{"spec":{"status":"TaskRunCancelled"}}`)
	require.NoError(t, admin.Patch(context.Background(), tr, client.RawPatch(types.MergePatchType, patch)))
}

// createPipelineRun creates PipelineRun name of one task, task, with one
// step: its TaskRun is name-task.
func (f *tektonFleet) createPipelineRun(t *testing.T, name, task, script string) {
	t.Helper()
	steps := []any{map[string]any{"name": task, "image": buildImage, "script": script}}
	pr := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tekton.dev/v1", "kind": "PipelineRun",
		"metadata": map[string]any{"namespace": f.ns, "name": name},
		"spec": map[string]any{"pipelineSpec": map[string]any{"tasks": []any{
			map[string]any{"name": task, "taskSpec": map[string]any{"steps": steps}},
		}}},
	}}
	require.NoError(t, admin.Create(context.Background(), pr))
}

// logTaskRuns logs the TaskRuns and pods left, for a failed run.
func (f *tektonFleet) logTaskRuns(t *testing.T) {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("tekton.dev/v1")
	l.SetKind("TaskRunList")
	if err := admin.List(context.Background(), l, client.InNamespace(f.ns)); err == nil {
		for _, tr := range l.Items {
			st, reason := succeeded(&tr)
			msg := ""
			conds, _, _ := unstructured.NestedSlice(tr.Object, "status", "conditions")
			if len(conds) > 0 {
				msg = fmt.Sprint(conds[0])
			}
			t.Logf("TaskRun %s: %s %s %s", tr.GetName(), st, reason, msg)
		}
	}
	pods := &corev1.PodList{}
	if err := admin.List(context.Background(), pods, client.InNamespace(f.ns)); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s: %s, annotations %v, statuses %+v", p.Name, p.Status.Phase, p.Annotations, p.Status.ContainerStatuses)
		}
	}
}
