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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/fleets/buildkiteapi"
	"github.com/runnerguard/runnerguard/e2e/internal/nodecluster"
	"github.com/runnerguard/runnerguard/internal/fleet/buildkite"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
)

// The stack as its Helm chart installs it (charts/agent-stack-k8s): the
// controller's ServiceAccount and Role in the jobs' namespace, the agent
// token's Secret, and the agent image hack/fleets/buildkite.sh built.
const (
	buildkiteControllerSA = "agent-stack-k8s-controller"
	buildkiteTokenSecret  = "buildkite-agent-token"
	buildkiteImage        = "runnerguard.local/e2e/buildkite-agent:1"
	buildkiteOrg          = "acme"
	buildkiteQueue        = "runnerguard"
	buildkiteStackKey     = "runnerguard-fleets"
	buildkiteAgentToken   = "bkua_runnerguard_fleets"
	// k8sPlugin is the kubernetes plugin's name in BUILDKITE_PLUGINS.
	k8sPlugin = "github.com/buildkite-plugins/kubernetes-buildkite-plugin"
)

// buildkiteFleet is the stack's controller running against the cluster
// with its jobs' namespace, and the stand-in for Buildkite.
type buildkiteFleet struct {
	ns         string
	controller string // the controller as the API server names it
	api        *buildkiteapi.Service
	reaper     *kubernetes.Clientset
	log        string
	// exited is closed when the controller exits, with exitErr.
	exited  chan struct{}
	exitErr error
}

// buildkiteBuilt is the stack's build (hack/fleets/buildkite.sh).
func buildkiteBuilt(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(nodecluster.EnvOr("FLEETS_BUILDKITE", filepath.Join("..", "..", ".cache", "fleets", "buildkite")))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "agent-stack-k8s")); err != nil {
		t.Fatalf("agent-stack-k8s not built (hack/fleets/buildkite.sh): %v", err)
	}
	return dir
}

// startBuildkiteAPI serves the stand-in on the node's bridge address, which
// the controller on the host and the agents in the pods both reach.
func startBuildkiteAPI(t *testing.T) (*buildkiteapi.Service, string) {
	t.Helper()
	u, err := url.Parse(adminCfg.Host)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", net.JoinHostPort(u.Hostname(), "0"))
	require.NoError(t, err)
	svc := buildkiteapi.New(buildkiteOrg, buildkiteAgentToken, buildkiteQueue)
	base := "http://" + lis.Addr().String()
	svc.SetBase(base)
	srv := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return svc, base + "/v3"
}

// grantBuildkite makes the controller's ServiceAccount with the chart's
// Role (rbac.yaml.tpl) and the agent token's Secret in ns.
func grantBuildkite(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: buildkiteControllerSA}}))
	require.NoError(t, admin.Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: buildkiteControllerSA},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"podtemplates", "secrets"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"list"}},
		},
	}))
	require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: buildkiteControllerSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: buildkiteControllerSA},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: buildkiteControllerSA}},
	}))
	require.NoError(t, admin.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: buildkiteTokenSecret},
		StringData: map[string]string{"BUILDKITE_AGENT_TOKEN": buildkiteAgentToken},
	}))
}

// startBuildkiteController runs agent-stack-k8s on the host as its
// ServiceAccount (a TokenRequest token in a kubeconfig), with a config
// file as the chart's config map writes it: the jobs' namespace, the
// queue, the agent image (present in the node: pulled if not present) and
// the stand-in as the agent endpoint, for the controller and the agents.
func (f *buildkiteFleet) startBuildkiteController(t *testing.T, dir, endpoint string) {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	tok, err := cs.CoreV1().ServiceAccounts(f.ns).CreateToken(context.Background(), buildkiteControllerSA, req, metav1.CreateOptions{})
	require.NoError(t, err)
	tmp := t.TempDir()
	kc := filepath.Join(tmp, "controller.kubeconfig")
	conf := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, certificate-authority: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: %q}}]
current-context: c
`, adminCfg.Host, caFile, tok.Status.Token, f.ns)
	require.NoError(t, os.WriteFile(kc, []byte(conf), 0o600))
	cfg := map[string]any{
		"namespace":                        f.ns,
		"id":                               buildkiteStackKey,
		"queue":                            buildkiteQueue,
		"image":                            buildkiteImage,
		"agent-token-secret":               buildkiteTokenSecret,
		"default-image-pull-policy":        "IfNotPresent",
		"default-image-check-pull-policy":  "IfNotPresent",
		"poll-interval":                    "1s",
		"job-cancel-checker-poll-interval": "1s",
		"max-in-flight":                    10,
		"agent-config":                     map[string]any{"endpoint": endpoint},
	}
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	cf := filepath.Join(tmp, "config.yaml") // JSON is YAML
	require.NoError(t, os.WriteFile(cf, b, 0o600))
	cmd := exec.Command(filepath.Join(dir, "agent-stack-k8s"), "--config", cf)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kc)
	f.log = artifact(t, "buildkite-controller.log")
	out, err := os.Create(f.log)
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	f.exited = make(chan struct{})
	go func() {
		f.exitErr = cmd.Wait()
		close(f.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		<-f.exited
		_ = out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(f.log)
			t.Logf("agent-stack-k8s log (whole in %s):\n%s", f.log, tail(string(b), 80))
			t.Logf("stand-in: no answer for %v", f.api.Unknown())
			keepDiagnostics(t, f.ns, "buildkite")
		}
	})
}

// startBuildkite runs the stack's controller (after runnerguard, which
// runs already) with an opted-in namespace for its jobs.
func startBuildkite(t *testing.T) *buildkiteFleet {
	t.Helper()
	dir := buildkiteBuilt(t)
	f := &buildkiteFleet{ns: newNamespace(t, true)}
	f.controller = "system:serviceaccount:" + f.ns + ":" + buildkiteControllerSA
	grantBuildkite(t, f.ns)
	f.reaper = tektonReaper(t, f.ns)
	var endpoint string
	f.api, endpoint = startBuildkiteAPI(t)
	buildkiteAPI.FollowAgents(f.api.AgentHost)
	f.startBuildkiteController(t, dir, endpoint)
	t.Cleanup(func() {
		if t.Failed() {
			f.logPods(t)
		}
	})
	return f
}

// command is a job's step: a command in busybox (the kubernetes plugin's
// podSpec), limited to 96Mi of memory.
func (f *buildkiteFleet) addJob(t *testing.T, id, step, command string) {
	t.Helper()
	ctr := map[string]any{"image": buildImage,
		"resources": map[string]any{"limits": map[string]any{"memory": "96Mi"}, "requests": map[string]any{"memory": "32Mi"}}}
	plugins, err := json.Marshal([]map[string]any{{k8sPlugin: map[string]any{"podSpec": map[string]any{"containers": []any{ctr}}}}})
	require.NoError(t, err)
	f.api.Add(buildkiteapi.Job{ID: id, Pipeline: "app", StepKey: step, Label: step, Command: command, Plugins: string(plugins)})
	// The REST API shows the job on its build, with the agent that ran it
	// as the stand-in's Agent API saw it register (FollowAgents).
	buildkiteAPI.AddJob(buildkiteBuild, notifytest.BuildkiteJob{ID: id})
}

// jobPod waits for the pod of job id with its command container running.
func (f *buildkiteFleet) jobPod(t *testing.T, id string) podRef {
	t.Helper()
	var ref podRef
	require.Eventually(t, func() bool {
		select {
		case <-f.exited:
			return true // told below
		default:
		}
		list := &corev1.PodList{}
		if admin.List(context.Background(), list, client.InNamespace(f.ns), client.MatchingLabels{buildkite.JobUUIDLabel: id}) != nil {
			return false
		}
		for _, p := range list.Items {
			if p.Status.StartTime == nil {
				continue
			}
			for _, s := range p.Status.ContainerStatuses {
				if s.Name == "container-0" && s.State.Running != nil {
					ref = podRef{namespace: p.Namespace, name: p.Name, uid: p.UID, startTime: *p.Status.StartTime}
					return true
				}
			}
		}
		return false
	}, 3*time.Minute, 250*time.Millisecond, "job %s's pod with container-0 running (controller log: %s; states %v)", id, f.log, f.api.Result(id).States)
	if ref.uid == "" {
		t.Fatalf("agent-stack-k8s exited (%v) before job %s's pod ran: its log is %s", f.exitErr, id, f.log)
	}
	return ref
}

// finished waits for job id to be finished (or canceled) on Buildkite.
func (f *buildkiteFleet) finished(t *testing.T, id string) buildkiteapi.Result {
	t.Helper()
	select {
	case <-f.api.Finished(id):
	case <-time.After(4 * time.Minute):
		t.Fatalf("job %s not finished: %+v", id, f.api.Result(id).States)
	}
	r := f.api.Result(id)
	t.Logf("job %s: states %v, exit %q signal %q (%s) detail %q; log tail:\n%s", id, r.States, r.ExitStatus, r.Signal, r.SignalReason, r.Detail, tail(r.Log, 12))
	return r
}

// logPods logs the pods left, for a failed run.
func (f *buildkiteFleet) logPods(t *testing.T) {
	pods := &corev1.PodList{}
	if err := admin.List(context.Background(), pods, client.InNamespace(f.ns)); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s: %s, annotations %v, init %+v, statuses %+v", p.Name, p.Status.Phase, p.Annotations, p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
		}
	}
}
