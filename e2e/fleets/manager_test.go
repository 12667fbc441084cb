//go:build fleets

package fleets

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/fleets/gitlabapi"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// managerSA is the runner manager's ServiceAccount, as the GitLab Runner
// chart names it.
const managerSA = "gitlab-runner"

// layout is where the GitLab Runner manager lives and which token it holds
// (docs/install/fleets.md lists the layouts the preset supports).
type layout struct {
	name string
	// ownNamespace: the manager's ServiceAccount lives in a namespace of
	// its own, not the build pods'.
	ownNamespace bool
	// podBound: its token is bound to a pod of its own that runs no job,
	// as a manager running in a pod holds; else one long-lived token bound
	// to no pod, as a manager outside the cluster holds.
	podBound bool
	// warn: the build namespace is in warn mode (its runnerguard.io/mode
	// label), the install in enforce.
	warn bool
	// buildNS and managerNS are named before the run (nameLayouts), so
	// that the chart's reports.gitlab.managers can name every manager, as
	// an operator names theirs.
	buildNS, managerNS string
}

var layouts = []layout{
	{name: "in-build-namespace-pod-token", podBound: true},
	{name: "own-namespace", ownNamespace: true},
	{name: "outside-long-lived-token"},
}

// nameLayouts names each layout's namespaces, the warn layout's among
// them.
func nameLayouts() {
	for _, l := range allLayouts() {
		l.buildNS = randomNamespace()
		l.managerNS = l.buildNS
		if l.ownNamespace {
			l.managerNS = randomNamespace()
		}
	}
}

// allLayouts are the enforce layouts and the warn layout.
func allLayouts() []*layout {
	out := []*layout{&warnLayout}
	for i := range layouts {
		out = append(out, &layouts[i])
	}
	return out
}

// managerUsernames are every layout's managers, as the API server names
// them: an operator names each of theirs, the warn layout's too, so that
// what the reporter decides of a layout's jobs is its trust rule's, never
// a name left out.
func managerUsernames() []string {
	var out []string
	for _, l := range allLayouts() {
		out = append(out, "system:serviceaccount:"+l.managerNS+":"+managerSA)
	}
	return out
}

// manager is one running GitLab Runner manager and its coordinator.
type manager struct {
	buildNS  string
	username string // the manager's ServiceAccount, as the API server names it
	coord    *gitlabapi.Coordinator
	log      string // the manager's own log file
	// trusted: the reporter tells its jobs' deaths (a manager in the build
	// namespace is refused: anyone granted edit there can act as it).
	trusted bool

	// ran are the jobs that ran, for the layout's count of reports.
	ran syncList[ranJob]
	// drainedNode is the node the drain case drained.
	drainedNode string
}

// ranJob is a job that ran and what was recorded of it.
type ranJob struct {
	id    int64
	pod   podRef
	class death.Class
}

// startManager makes l's namespaces, ServiceAccount, RBAC and token, and
// runs gitlab-runner against a fresh coordinator until the test ends.
func startManager(t *testing.T, l layout) *manager {
	t.Helper()
	if _, err := os.Stat(gitlabRunner); err != nil {
		t.Fatalf("gitlab-runner not built (hack/fleets/gitlab.sh): %v", err)
	}
	ctx := context.Background()
	m := &manager{buildNS: l.buildNS, coord: gitlabapi.New(), trusted: l.managerNS != l.buildNS}
	build := map[string]string{runnerpod.EnabledNamespaceLabel: "true"}
	if l.warn {
		build[runnerpod.ModeLabel] = "warn"
	}
	labelledNamespace(t, l.buildNS, build)
	saNS := l.managerNS
	if l.ownNamespace {
		makeNamespace(t, saNS, false)
	}
	m.username = "system:serviceaccount:" + saNS + ":" + managerSA
	require.NoError(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: saNS, Name: managerSA}}))
	grantManager(t, m.buildNS, saNS)
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}
	if l.podBound {
		pod := managerPod(t, saNS)
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tok, err := cs.CoreV1().ServiceAccounts(saNS).CreateToken(ctx, managerSA, req, metav1.CreateOptions{})
	require.NoError(t, err)

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: m.coord, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })

	dir := t.TempDir()
	conf := filepath.Join(dir, "config.toml")
	require.NoError(t, os.WriteFile(conf, []byte(runnerConfig(l.name, "http://"+lis.Addr().String()+"/", tok.Status.Token, m.buildNS)), 0o600))
	m.log = artifact(t, "manager-"+l.name+".log")
	out, err := os.Create(m.log)
	require.NoError(t, err)
	cmd := exec.Command(gitlabRunner, "run", "--config", conf, "--working-directory", dir)
	cmd.Stdout, cmd.Stderr = out, out
	// The manager goes with the suite, even when the suite is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = out.Close()
		if t.Failed() {
			b, _ := os.ReadFile(m.log)
			t.Logf("manager log (%s, whole in %s):\n%s", l.name, m.log, tail(string(b), 60))
			keepDiagnostics(t, m.buildNS, l.name)
		}
	})
	return m
}

// ramdisk is where the build container mounts a memory-backed emptyDir, as
// a runner's admin configures one to build in RAM: a job that fills it
// fills its container's memory.
const ramdisk = "/ramdisk"

// runnerConfig is the manager's config.toml: the Kubernetes executor,
// building in ns, with the build container's memory limited so a job can
// hit it.
func runnerConfig(name, url, token, ns string) string {
	return fmt.Sprintf(`concurrent = 8
check_interval = 1
log_level = "debug"
shutdown_timeout = 5

[[runners]]
  name = "fleet-%s"
  url = %q
  token = "glrt-fleet-%s"
  executor = "kubernetes"
  # busybox images have no bash: sh in the build and helper containers.
  shell = "sh"
  [runners.kubernetes]
    host = %q
    bearer_token = %q
    ca_file = %q
    namespace = %q
    image = %q
    helper_image = %q
    pull_policy = ["never"]
    memory_limit = "96Mi"
    helper_memory_limit = "128Mi"
    poll_interval = 1
    poll_timeout = 120
    [[runners.kubernetes.volumes.empty_dir]]
      name = "ramdisk"
      mount_path = %q
      medium = "Memory"
      size_limit = "256Mi"
`, name, url, name, adminCfg.Host, token, caFile, ns, buildImage, helperImage, ramdisk)
}

// newNamespace makes a namespace, opted in to runnerguard when optIn,
// deleted after the test.
func newNamespace(t *testing.T, optIn bool) string {
	t.Helper()
	name := randomNamespace()
	makeNamespace(t, name, optIn)
	return name
}

func randomNamespace() string { return "fleet-" + strings.ToLower(rand.String(6)) }

// makeNamespace makes namespace name, opted in to runnerguard when optIn,
// deleted after the test.
func makeNamespace(t *testing.T, name string, optIn bool) {
	t.Helper()
	var labels map[string]string
	if optIn {
		labels = map[string]string{runnerpod.EnabledNamespaceLabel: "true"}
	}
	labelledNamespace(t, name, labels)
}

// labelledNamespace makes namespace name with labels, deleted after the
// test.
func labelledNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	require.NoError(t, admin.Create(context.Background(), ns))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
}

// grantManager gives the manager's ServiceAccount (in saNS) the Kubernetes
// executor's permissions in buildNS, as the GitLab Runner chart's Role does.
func grantManager(t *testing.T, buildNS, saNS string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: buildNS, Name: managerSA},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""},
			Resources: []string{"pods", "pods/exec", "pods/attach", "pods/log", "secrets", "configmaps", "services", "events", "serviceaccounts"},
			Verbs:     []string{"get", "list", "watch", "create", "delete", "patch", "update"},
		}},
	}
	require.NoError(t, admin.Create(ctx, role))
	require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: buildNS, Name: managerSA},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: managerSA},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: managerSA}},
	}))
}

// managerPod is the pod a manager runs in (here only its identity: the
// process runs on the host with this pod's bound token).
func managerPod(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gitlab-runner-manager"},
		Spec: corev1.PodSpec{
			ServiceAccountName:            managerSA,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "manager", Image: buildImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "86400"},
			}},
		},
	}
	require.NoError(t, admin.Create(context.Background(), pod))
	require.Eventually(t, func() bool {
		return admin.Get(context.Background(), client.ObjectKeyFromObject(pod), pod) == nil &&
			pod.Status.Phase == corev1.PodRunning
	}, 2*time.Minute, 250*time.Millisecond, "the manager's pod to run")
	return pod
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
