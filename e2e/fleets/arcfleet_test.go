//go:build fleets

package fleets

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/e2e/fleets/actionsapi"
	"github.com/runnerguard/runnerguard/e2e/internal/nodecluster"
)

// ARC's namespace and ServiceAccounts, as ARC's charts name them.
const (
	arcSystem       = "arc-systems"
	arcControllerSA = "arc-gha-rs-controller"
	arcListenerSA   = "arc-runner-set-listener"
	arcOrg          = "rg-org"
	arcPAT          = "rg-pat"
	arcSetName      = "fleet"
)

var arcCRDs = []string{"ephemeralrunners", "ephemeralrunnersets"}

// arcFleet is ARC's controller and listener running against a stand-in
// Actions service, with one EphemeralRunnerSet in ns.
type arcFleet struct {
	ns         string
	svc        *actionsapi.Service
	controller string // the controller's username
	logs       map[string]string
}

// arcBuilt is ARC's build (hack/fleets/arc.sh).
func arcBuilt(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(nodecluster.EnvOr("FLEETS_ARC", filepath.Join("..", "..", ".cache", "fleets", "arc")))
	require.NoError(t, err)
	for _, f := range []string{"arc-controller", "ghalistener", "crds"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("ARC not built (hack/fleets/arc.sh): %v", err)
		}
	}
	return dir
}

// arcCRD lists ARC's kind, to see whether its CRD is served.
func arcServed(kind string) bool {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion("actions.github.com/v1alpha1")
	l.SetKind(kind + "List")
	return admin.List(context.Background(), l) == nil
}

// removeARCCRDs deletes ARC's CRDs if a run left them, so that ARC is
// installed after runnerguard.
func removeARCCRDs(t *testing.T) {
	t.Helper()
	for _, name := range arcCRDs {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName(name + ".actions.github.com")
		if err := admin.Delete(context.Background(), crd); err != nil && !apierrors.IsNotFound(err) {
			require.NoError(t, err)
		}
	}
	require.Eventually(t, func() bool { return !arcServed("EphemeralRunner") }, 2*time.Minute, time.Second, "ARC's CRDs gone")
}

// installARCCRDs creates the CRDs of ARC's chart.
func installARCCRDs(t *testing.T, dir string) {
	t.Helper()
	for _, name := range arcCRDs {
		b, err := os.ReadFile(filepath.Join(dir, "crds", "actions.github.com_"+name+".yaml"))
		require.NoError(t, err)
		crd := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(b, &crd.Object))
		if err := admin.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
	}
	require.Eventually(t, func() bool { return arcServed("EphemeralRunner") && arcServed("EphemeralRunnerSet") },
		time.Minute, 250*time.Millisecond, "ARC's CRDs served")
}

// startStandIn serves the Actions service on the node's bridge address,
// which the runner pods, the controller and the listener all reach.
func startStandIn(t *testing.T) *actionsapi.Service {
	t.Helper()
	u, err := url.Parse(adminCfg.Host)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", net.JoinHostPort(u.Hostname(), "0"))
	require.NoError(t, err)
	svc := actionsapi.New(arcOrg, arcPAT, 20*time.Second)
	svc.SetBase("http://" + lis.Addr().String())
	srv := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return svc
}

// grantARC makes ARC's ServiceAccounts and gives them, in the runners'
// namespace, what ARC's charts give them.
func grantARC(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: arcSystem}}); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	roles := map[string][]rbacv1.PolicyRule{
		arcControllerSA: {
			{APIGroups: []string{"actions.github.com"}, Resources: []string{"*"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "secrets", "events", "serviceaccounts"}, Verbs: []string{"*"}},
		},
		arcListenerSA: {
			{APIGroups: []string{"actions.github.com"}, Resources: []string{"ephemeralrunnersets", "ephemeralrunners", "ephemeralrunners/status"}, Verbs: []string{"get", "list", "watch", "patch"}},
		},
	}
	for sa, rules := range roles {
		if err := admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: arcSystem, Name: sa}}); err != nil && !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err)
		}
		require.NoError(t, admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}, Rules: rules}))
		require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: sa},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: arcSystem, Name: sa}},
		}))
	}
}

func saToken(t *testing.T, sa string) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	tok, err := cs.CoreV1().ServiceAccounts(arcSystem).CreateToken(context.Background(), sa, req, metav1.CreateOptions{})
	require.NoError(t, err)
	return tok.Status.Token
}

// startProcess runs cmd until the test ends, its output in a log file
// printed if the test failed.
func (f *arcFleet) startProcess(t *testing.T, name string, cmd *exec.Cmd) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".log")
	out, err := os.Create(path)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = out, out
	// It goes with the suite, even when the suite is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	f.logs[name] = path
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(path)
			t.Logf("%s log:\n%s", name, tail(string(b), 80))
		}
	})
}

// startController runs ARC's EphemeralRunnerSet and EphemeralRunner
// controllers as ARC's controller ServiceAccount.
func (f *arcFleet) startController(t *testing.T, dir string) {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "controller.kubeconfig")
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, adminCfg.Host, caFile, saToken(t, arcControllerSA))
	require.NoError(t, os.WriteFile(kc, []byte(conf), 0o600))
	cmd := exec.Command(filepath.Join(dir, "arc-controller"), "--watch-single-namespace", f.ns, "--log-level", "info")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kc)
	f.startProcess(t, "arc-controller", cmd)
}

// startListener runs ARC's listener as its ServiceAccount. The listener
// reads only an in-cluster config: it gets one in a mount namespace of its
// own, with the ServiceAccount's token where a pod's would be.
func (f *arcFleet) startListener(t *testing.T, dir string, setID int) {
	t.Helper()
	tmp := t.TempDir()
	ca, err := os.ReadFile(caFile)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "ca.crt"), ca, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "token"), []byte(saToken(t, arcListenerSA)), 0o600))
	conf, err := json.Marshal(map[string]any{
		"configure_url": f.svc.ConfigURL(), "github_token": arcPAT,
		"ephemeral_runner_set_namespace": f.ns, "ephemeral_runner_set_name": arcSetName,
		"max_runners": 3, "min_runners": 0, "runner_scale_set_id": setID, "runner_scale_set_name": arcSetName,
		"log_level": "debug", "log_format": "text",
	})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "config.json"), conf, 0o600))
	u, err := url.Parse(adminCfg.Host)
	require.NoError(t, err)
	sa := "/run/secrets/kubernetes.io/serviceaccount"
	script := "mount -t tmpfs tmpfs /run && mkdir -p " + sa + " && cp \"$D/token\" \"$D/ca.crt\" " + sa + "/ && exec \"$LISTENER\""
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "D="+tmp, "LISTENER="+filepath.Join(dir, "ghalistener"),
		"LISTENER_CONFIG_PATH="+filepath.Join(tmp, "config.json"),
		"KUBERNETES_SERVICE_HOST="+u.Hostname(), "KUBERNETES_SERVICE_PORT="+cmp(u.Port(), "443"))
	f.startProcess(t, "ghalistener", cmd)
}

func cmp(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// createRunnerSet creates the EphemeralRunnerSet the listener scales: its
// runners are busybox running actionsapi.RunnerScript, with the 96Mi
// memory limit the OOM case fills.
func (f *arcFleet) createRunnerSet(t *testing.T, setID int) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, admin.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "fleet-github"},
		StringData: map[string]string{"github_token": arcPAT},
	}))
	runner := map[string]any{
		"name": "runner", "image": buildImage, "command": []string{"sh", "-c", actionsapi.RunnerScript},
		"env":       []map[string]string{{"name": "ACTIONS_STANDIN", "value": f.svc.ConfigURL()[:len(f.svc.ConfigURL())-len("/"+arcOrg)]}},
		"resources": map[string]any{"limits": map[string]string{"memory": "96Mi"}, "requests": map[string]string{"memory": "32Mi"}},
	}
	ers := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunnerSet",
		"metadata": map[string]any{"namespace": f.ns, "name": arcSetName},
		"spec": map[string]any{"replicas": 0, "patchID": 0, "ephemeralRunnerSpec": map[string]any{
			"githubConfigUrl": f.svc.ConfigURL(), "githubConfigSecret": "fleet-github", "runnerScaleSetId": setID,
			"spec": map[string]any{"restartPolicy": "Never", "terminationGracePeriodSeconds": 30, "containers": []any{runner}},
		}},
	}}
	require.NoError(t, admin.Create(ctx, ers))
}

// startARC installs ARC's CRDs (after runnerguard, which runs already),
// then runs its controller and listener for one scale set in a fresh
// opted-in namespace.
func startARC(t *testing.T) *arcFleet {
	t.Helper()
	dir := arcBuilt(t)
	removeARCCRDs(t)
	installARCCRDs(t, dir)
	f := &arcFleet{ns: newNamespace(t, true), svc: startStandIn(t), logs: map[string]string{}}
	f.controller = "system:serviceaccount:" + arcSystem + ":" + arcControllerSA
	grantARC(t, f.ns)
	t.Cleanup(func() {
		if t.Failed() {
			f.logPods(t)
		}
	})
	setID := f.svc.CreateScaleSet(arcSetName)
	f.createRunnerSet(t, setID)
	f.startController(t, dir)
	f.startListener(t, dir, setID)
	return f
}

// runnerPod waits for the pod of runner name (ARC names the pod after its
// EphemeralRunner, and the runner after both), its runner container running.
func (f *arcFleet) runnerPod(t *testing.T, name string) podRef {
	t.Helper()
	var ref podRef
	require.Eventually(t, func() bool {
		p := &corev1.Pod{}
		if admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, p) != nil || p.Status.StartTime == nil {
			return false
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "runner" && (s.State.Running != nil || s.State.Terminated != nil) {
				ref = podRef{namespace: p.Namespace, name: p.Name, uid: p.UID, startTime: *p.Status.StartTime}
				return true
			}
		}
		return false
	}, 3*time.Minute, 250*time.Millisecond, "runner pod %s/%s to run", f.ns, name)
	return ref
}

// jobRunner waits until a runner took job id and names it.
func (f *arcFleet) jobRunner(t *testing.T, id int64) string {
	t.Helper()
	var name string
	require.Eventually(t, func() bool { name = f.svc.RunnerOf(id); return name != "" },
		4*time.Minute, 250*time.Millisecond, "a runner to take job %d", id)
	return name
}

// logPods logs the runner pods left and their runners' output, for a
// failed run.
func (f *arcFleet) logPods(t *testing.T) {
	list := &corev1.PodList{}
	if err := admin.List(context.Background(), list, client.InNamespace(f.ns)); err != nil {
		t.Logf("listing pods: %v", err)
		return
	}
	for _, p := range list.Items {
		b, _ := cs.CoreV1().Pods(f.ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: "runner"}).DoRaw(context.Background())
		t.Logf("pod %s: %s, annotations %v\nrunner output:\n%s", p.Name, p.Status.Phase, p.Annotations, tail(string(b), 20))
	}
}
