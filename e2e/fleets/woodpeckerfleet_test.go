//go:build fleets

package fleets

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/nodecluster"
)

// The agent's ServiceAccount as Woodpecker's helm chart names it, and the
// pod it runs in (here only its identity: the agent runs on the host with
// that pod's bound token, as an agent in the steps' namespace holds).
const (
	woodpeckerAgentSA  = "woodpecker-agent"
	woodpeckerAgentPod = "woodpecker-agent-0"
	woodpeckerToken    = "fleet-agent-secret" // WOODPECKER_AGENT_SECRET
	woodpeckerRepo     = "acme/app"
)

// woodpeckerFleet is Woodpecker's agent (Kubernetes backend) running
// against the cluster with the steps' namespace its own, and the stand-in
// server it takes workflows from.
type woodpeckerFleet struct {
	ns        string
	agentUser string // the agent's ServiceAccount, as the API server names it
	reaper    *kubernetes.Clientset
	control   string // the stand-in's control URL
	log       string // the agent's log
}

// woodpeckerBuilt is Woodpecker's build (hack/fleets/woodpecker.sh).
func woodpeckerBuilt(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(nodecluster.EnvOr("FLEETS_WOODPECKER", filepath.Join("..", "..", ".cache", "fleets", "woodpecker")))
	require.NoError(t, err)
	for _, f := range []string{"woodpecker-agent", "woodpecker-standin"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatalf("Woodpecker not built (hack/fleets/woodpecker.sh): %v", err)
		}
	}
	return dir
}

// grantWoodpeckerAgent gives the agent's ServiceAccount what Woodpecker's
// helm chart gives it in the steps' namespace: pods (and their logs),
// the workflow's headless Service and its volume claim.
func grantWoodpeckerAgent(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, admin.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: woodpeckerAgentSA},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "delete", "get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, Verbs: []string{"create", "delete"}},
		},
	}))
	require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: woodpeckerAgentSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: woodpeckerAgentSA},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: woodpeckerAgentSA}},
	}))
}

// woodpeckerAgentToken is a token of the agent's ServiceAccount bound to
// the agent's pod (a pod that runs no step).
func woodpeckerAgentToken(t *testing.T, ns string) string {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: woodpeckerAgentPod, Labels: map[string]string{"app.kubernetes.io/name": "agent"}},
		Spec: corev1.PodSpec{
			ServiceAccountName:            woodpeckerAgentSA,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "agent", Image: buildImage, ImagePullPolicy: corev1.PullNever, Command: []string{"sleep", "86400"},
			}},
		},
	}
	require.NoError(t, admin.Create(ctx, pod))
	require.Eventually(t, func() bool {
		return admin.Get(ctx, client.ObjectKeyFromObject(pod), pod) == nil && pod.Status.Phase == corev1.PodRunning
	}, 2*time.Minute, 250*time.Millisecond, "the agent's pod to run")
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](24 * 3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, woodpeckerAgentSA, req, metav1.CreateOptions{})
	require.NoError(t, err)
	return tok.Status.Token
}

// startProcess runs bin with env until the test ends, its output in log.
func startProcess(t *testing.T, log, bin string, env []string, args ...string) {
	t.Helper()
	out, err := os.Create(log)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = out, out
	// It goes with the suite, even when the suite is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		_ = out.Close()
	})
}

// startWoodpecker makes an opted-in namespace with the agent's
// ServiceAccount, RBAC and pod, and a reaper, and runs the stand-in server
// and the agent (WOODPECKER_BACKEND=kubernetes, the namespace its
// WOODPECKER_BACKEND_K8S_NAMESPACE) until the test ends.
func startWoodpecker(t *testing.T) *woodpeckerFleet {
	t.Helper()
	dir := woodpeckerBuilt(t)
	ctx := context.Background()
	f := &woodpeckerFleet{ns: newNamespace(t, true)}
	f.agentUser = "system:serviceaccount:" + f.ns + ":" + woodpeckerAgentSA
	require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: woodpeckerAgentSA}}))
	grantWoodpeckerAgent(t, f.ns)
	token := woodpeckerAgentToken(t, f.ns)
	f.reaper = tektonReaper(t, f.ns)

	grpcPort, httpPort := freePort(t), freePort(t)
	f.control = "http://127.0.0.1:" + httpPort
	startProcess(t, artifact(t, "woodpecker-standin.log"), filepath.Join(dir, "woodpecker-standin"), os.Environ(),
		"-grpc", "127.0.0.1:"+grpcPort, "-http", "127.0.0.1:"+httpPort, "-agent-token", woodpeckerToken)
	require.Eventually(t, func() bool {
		res, err := http.Get(f.control + "/workflows/none")
		if err == nil {
			_ = res.Body.Close()
		}
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "the stand-in server to listen")

	tmp := t.TempDir()
	kc := filepath.Join(tmp, "agent.kubeconfig")
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, adminCfg.Host, caFile, token)
	require.NoError(t, os.WriteFile(kc, []byte(conf), 0o600))
	f.log = artifact(t, "woodpecker-agent.log")
	env := append(os.Environ(),
		// The backend counts itself available only in a cluster (its
		// IsAvailable reads KUBERNETES_SERVICE_HOST); without
		// KUBERNETES_SERVICE_PORT it is not in-cluster and reads KUBECONFIG.
		"KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=", "KUBECONFIG="+kc,
		"WOODPECKER_SERVER=127.0.0.1:"+grpcPort, "WOODPECKER_AGENT_SECRET="+woodpeckerToken,
		"WOODPECKER_BACKEND=kubernetes", "WOODPECKER_BACKEND_K8S_NAMESPACE="+f.ns,
		"WOODPECKER_MAX_WORKFLOWS=8", "WOODPECKER_HOSTNAME=fleet-agent", "WOODPECKER_HEALTHCHECK=false",
		"WOODPECKER_AGENT_CONFIG_FILE="+filepath.Join(tmp, "agent.conf"), "WOODPECKER_LOG_LEVEL=debug")
	startProcess(t, f.log, filepath.Join(dir, "woodpecker-agent"), env)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(f.log)
			t.Logf("Woodpecker agent log (whole in %s):\n%s", f.log, tail(string(b), 60))
			f.logPods(t)
			keepDiagnostics(t, f.ns, "woodpecker")
		}
	})
	return f
}

// wpStep is a commands step of a workflow; memory, when set, is its
// memory limit through the step's Kubernetes backend options.
type wpStep struct {
	Name        string   `json:"name"`
	Image       string   `json:"image"`
	Commands    []string `json:"commands"`
	MemoryLimit string   `json:"memoryLimit,omitempty"`
}

// wpStatus is what the agent reported of a workflow (woodpeckerapi.Status).
type wpStatus struct {
	Taken, Initialized, Done, Canceled bool
	Error                              string
	Steps                              []struct {
		Name, UUID, Pod, Error, Log string
		Updates                     int
		Exited, Canceled, Skipped   bool
		ExitCode                    int32
	}
}

// queue queues workflow id with steps (timeout in minutes, 0 for the
// agent's hour) and returns its step pods' names by step.
func (f *woodpeckerFleet) queue(t *testing.T, id string, timeout int64, steps ...wpStep) map[string]string {
	t.Helper()
	for i := range steps {
		steps[i].Image = buildImage
	}
	body, err := json.Marshal(map[string]any{"id": id, "repo": woodpeckerRepo, "timeoutMinutes": timeout, "steps": steps})
	require.NoError(t, err)
	res, err := http.Post(f.control+"/workflows", "application/json", bytes.NewReader(body))
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	pods := map[string]string{}
	require.NoError(t, json.NewDecoder(res.Body).Decode(&pods))
	return pods
}

// cancel cancels workflow id as a user does in the UI: the server answers
// the agent's Wait with canceled.
func (f *woodpeckerFleet) cancel(t *testing.T, id string) {
	t.Helper()
	res, err := http.Post(f.control+"/workflows/"+id+"/cancel", "", nil)
	require.NoError(t, err)
	_ = res.Body.Close()
	require.Equal(t, http.StatusNoContent, res.StatusCode)
}

func (f *woodpeckerFleet) status(id string) (wpStatus, error) {
	var st wpStatus
	res, err := http.Get(f.control + "/workflows/" + id)
	if err != nil {
		return st, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status of workflow %s: %s", id, res.Status)
	}
	return st, json.NewDecoder(res.Body).Decode(&st)
}

// done waits for the agent's Done of workflow id and returns its status.
func (f *woodpeckerFleet) done(t *testing.T, id string) wpStatus {
	t.Helper()
	var st wpStatus
	require.Eventually(t, func() bool {
		var err error
		st, err = f.status(id)
		return err == nil && st.Done
	}, 4*time.Minute, 500*time.Millisecond, "workflow %s to be done (agent log: %s)", id, f.log)
	t.Logf("workflow %s: canceled %v, error %q", id, st.Canceled, st.Error)
	for _, s := range st.Steps {
		t.Logf("  step %s (%s): %d updates, exited %v exit %d canceled %v skipped %v error %q; log:\n%s",
			s.Name, s.Pod, s.Updates, s.Exited, s.ExitCode, s.Canceled, s.Skipped, s.Error, s.Log)
	}
	return st
}

// stepPod waits for pod name (step's) with its one container running.
func (f *woodpeckerFleet) stepPod(t *testing.T, name string) podRef {
	t.Helper()
	var ref podRef
	require.Eventually(t, func() bool {
		p := &corev1.Pod{}
		if admin.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, p) != nil || p.Status.StartTime == nil {
			return false
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == name && s.State.Running != nil {
				ref = podRef{namespace: p.Namespace, name: p.Name, uid: p.UID, startTime: *p.Status.StartTime}
				return true
			}
		}
		return false
	}, 3*time.Minute, 250*time.Millisecond, "step pod %s running (agent log: %s)", name, f.log)
	return ref
}

// logPods logs the pods left, for a failed run.
func (f *woodpeckerFleet) logPods(t *testing.T) {
	pods := &corev1.PodList{}
	if err := admin.List(context.Background(), pods, client.InNamespace(f.ns)); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s: %s, labels %v, annotations %v, statuses %+v", p.Name, p.Status.Phase, p.Labels, p.Annotations, p.Status.ContainerStatuses)
		}
	}
}
