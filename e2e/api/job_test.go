//go:build e2e

package api

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// What the policy's job rules say when they refuse (shortened).
const (
	deadlineRefused   = "spec.activeDeadlineSeconds set or shortened on a busy runner"
	imageRefused      = "a container's image changed on a busy runner"
	tolerationRefused = "tolerationSeconds set or shortened on a busy runner"
	ephemeralRefused  = "an ephemeral container added to a busy runner pod"
	resizeRefused     = "a busy runner pod resized"
)

// A change to the pod: its name says what it does; apply makes it through
// the pod or the subresource that takes it, as c.
type change struct {
	refusal string
	apply   func(t *testing.T, c client.Client, pod *corev1.Pod) error
	// needs is what the API server must have for the change to exist; nil:
	// every minor the chart supports has it.
	needs *apitest.Feature
}

// update reads the pod as it is, changes it and writes it back as c to
// subresource ("" for the pod itself).
func update(subresource string, f func(*corev1.Pod)) func(*testing.T, client.Client, *corev1.Pod) error {
	return func(t *testing.T, c client.Client, pod *corev1.Pod) error {
		t.Helper()
		ctx := context.Background()
		got := &corev1.Pod{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(pod), got))
		f(got)
		if subresource == "" {
			return c.Update(ctx, got)
		}
		return c.SubResource(subresource).Update(ctx, got)
	}
}

var (
	shortenDeadline = change{deadlineRefused, update("", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To(int64(1)) }), nil}
	changeImage     = change{imageRefused, update("", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "example.com/sleeper:2" }), nil}
	// A NoExecute toleration with 0 seconds: the taint manager evicts the
	// pod as soon as its node is tainted unreachable, as an exempt
	// principal the guard never sees.
	tolerateBriefly = change{tolerationRefused, update("", func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{
			Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(0)),
		})
	}), nil}
	addDebugger = change{ephemeralRefused, update("ephemeralcontainers", func(p *corev1.Pod) {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "example.com/busybox:1",
				TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent},
			TargetContainerName: p.Spec.Containers[0].Name,
		})
	}), nil}
	shrinkCPU = shrink(func(p *corev1.Pod) *corev1.ResourceRequirements { return &p.Spec.Containers[0].Resources })
	// A runner pod's other containers: GitLab's helper, ARC's dind sidecar.
	shrinkHelper  = shrink(func(p *corev1.Pod) *corev1.ResourceRequirements { return &p.Spec.Containers[1].Resources })
	shrinkSidecar = shrink(func(p *corev1.Pod) *corev1.ResourceRequirements {
		return &p.Spec.InitContainers[len(p.Spec.InitContainers)-1].Resources
	})
	// The pod's own cgroup, which every container lives in: still above
	// its containers' sum, as the API server requires.
	shrinkPodLevel = change{resizeRefused, update("resize", func(p *corev1.Pod) {
		p.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("150m")
		p.Spec.Resources.Limits[corev1.ResourceCPU] = resource.MustParse("300m")
	}), &apitest.PodLevelResize}
)

// shrink is a resize (pods/resize) that halves the CPU of the resources
// at.
func shrink(at func(*corev1.Pod) *corev1.ResourceRequirements) change {
	return change{resizeRefused, update("resize", func(p *corev1.Pod) {
		r := at(p)
		r.Requests[corev1.ResourceCPU] = resource.MustParse("50m")
		r.Limits[corev1.ResourceCPU] = resource.MustParse("100m")
	}), &apitest.PodResize}
}

// resizable puts pod on a node that exists and reports its running
// containers' and its pod-level resources, as a kubelet that supports
// in-place resize does:
// the API server refuses a resize otherwise, before any policy.
func resizable(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-resize"}}
	switch err := admin.Create(ctx, node); {
	case err == nil:
		room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
		node.Status.Capacity, node.Status.Allocatable = room, room
		// A kubelet that resizes pod-level resources declares so.
		node.Status.DeclaredFeatures = []string{"InPlacePodLevelResourcesVerticalScaling"}
		require.NoError(t, admin.Status().Update(ctx, node))
	case !apierrors.IsAlreadyExists(err):
		require.NoError(t, err)
	}
	pod.Spec.NodeName = node.Name
	reportResources(pod.Status.ContainerStatuses, pod.Spec.Containers)
	reportResources(pod.Status.InitContainerStatuses, pod.Spec.InitContainers)
	if pod.Spec.Resources != nil {
		pod.Status.Resources = pod.Spec.Resources.DeepCopy()
	}
	return pod
}

// reportResources sets each running container's reported resources to its spec's.
func reportResources(statuses []corev1.ContainerStatus, containers []corev1.Container) {
	for i, cs := range statuses {
		for _, c := range containers {
			if c.Name == cs.Name && cs.State.Running != nil {
				statuses[i].Resources = c.Resources.DeepCopy()
			}
		}
	}
}

// sized gives a pod's first container resources a resize can change.
func sized(w *podtest.Wrapper) *podtest.Wrapper {
	return w.Resources(w.Spec.Containers[0].Name,
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")})
}

// sizedAs gives w's container c the resources sized gives the first.
func sizedAs(w *podtest.Wrapper, c string) *podtest.Wrapper {
	first := w.Spec.Containers[0].Resources
	return w.Resources(c, first.Requests.DeepCopy(), first.Limits.DeepCopy())
}

// podDebugger is what neither edit nor admin grants (kube-apiserver 1.37):
// ephemeral containers and in-place resizes, as a debugging role or a
// vertical autoscaler holds them.
const podDebugger = "e2e-pod-debugger"

// mayDebug grants p podDebugger in ns, waiting until it may resize pods.
func mayDebug(t *testing.T, ns string, p principal) principal {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: podDebugger}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers", "pods/resize"}, Verbs: []string{"get", "update", "patch"}},
	}}
	if err := admin.Create(context.Background(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	grant(t, ns, p, podDebugger, authorizationv1.ResourceAttributes{Verb: "update", Resource: "pods", Subresource: "resize"})
	return p
}

// Issue 28, class 1: a busy runner ended without a delete. Each change that
// would end or endanger the job, tried as the principal who would try it,
// through the real API server and the policy as the chart ships it.
func TestABusyRunnerCannotBeEndedWithoutADelete(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	ciJob := may(t, ns, serviceAccount("system:serviceaccount:"+ns+":ci-job"), podPatcher)
	nsAdmin := may(t, ns, person("dana@example.com"), "admin")
	operator := mayDebug(t, ns, may(t, ns, person("olga@example.com"), "edit"))
	mayOverride(t, ns, operator)
	arc := may(t, ns, serviceAccount(arcController), "edit")
	// A reaper that may also debug pods, and a vertical autoscaler.
	debugger := mayDebug(t, ns, may(t, ns, serviceAccount("system:serviceaccount:ci-infra:debug-reaper"), "edit"))
	vpa := mayDebug(t, ns, serviceAccount("system:serviceaccount:kube-system:vpa-updater"))

	t.Run("edit and admin grant neither ephemeral containers nor resizes", func(t *testing.T) {
		for _, p := range []principal{reaperSA, nsAdmin} {
			for _, c := range []change{addDebugger, shrinkCPU} {
				pod := create(t, nil, running(sized(podtest.Runner(ns, "rbac-"+strings.ToLower(rand.String(4)))), "runner"))
				err := c.apply(t, p.client(t), pod)
				require.True(t, apierrors.IsForbidden(err), "403, not %v", err)
				assert.Contains(t, err.Error(), "cannot update resource")
			}
		}
	})

	generic := func(name string) *corev1.Pod { return running(sized(podtest.Runner(ns, name)), "runner") }
	scaleSet := func(name string) *corev1.Pod { return running(sized(podtest.ARCScaleSet(ns, name)), "runner") }
	gitlab := func(name string) *corev1.Pod {
		return running(sized(podtest.GitLab(ns, name)), "build")
	}
	notStarted := func(name string) *corev1.Pod { return sized(podtest.Runner(ns, name)).Obj() }
	overridden := func(name string) *corev1.Pod {
		return running(sized(podtest.Runner(ns, name)).Annotate(runnerpod.AllowDelete, "node pool upgrade"), "runner")
	}
	ended := func(name string) *corev1.Pod {
		return sized(podtest.Runner(ns, name)).Terminated("runner", 0, "Completed").Obj()
	}
	// A GitLab pod whose build container ended while its helper runs: the
	// API server resizes only a pod with a running container.
	endedRunning := func(name string) *corev1.Pod {
		return sized(podtest.GitLab(ns, name)).Terminated("build", 0, "Completed").Running("helper").Obj()
	}
	// GitLab's helper, running beside a busy build container.
	gitlabHelper := func(name string) *corev1.Pod {
		return running(sizedAs(sized(podtest.GitLab(ns, name)), "helper").Running("helper"), "build")
	}
	// ARC's dind, a native sidecar running beside a busy runner.
	scaleSetDind := func(name string) *corev1.Pod {
		return running(sizedAs(sized(podtest.ARCScaleSet(ns, name)), "dind").SidecarRunning("dind"), "runner")
	}
	// A runner pod with pod-level resources: its cgroup's limit.
	podLevel := func(name string) *corev1.Pod {
		w := sized(podtest.Runner(ns, name))
		w.PodLimits(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
			corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("400m"), corev1.ResourceMemory: resource.MustParse("256Mi")})
		return running(w, "runner")
	}
	onResizableNode := func(pod func(string) *corev1.Pod) func(string) *corev1.Pod {
		return func(name string) *corev1.Pod { return resizable(t, pod(name)) }
	}

	cases := []struct {
		name    string
		pod     func(string) *corev1.Pod
		by      principal
		change  change
		allowed bool
	}{
		{"a reaper with edit cannot shorten a busy runner's deadline", generic, reaperSA, shortenDeadline, false},
		{"a namespace admin cannot either", generic, nsAdmin, shortenDeadline, false},
		{"a CI job's service account cannot set its neighbour's deadline", gitlab, ciJob, shortenDeadline, false},
		{"a reaper cannot change a busy runner's image", generic, reaperSA, changeImage, false},
		{"a reaper cannot change a busy GitLab build container's image", gitlab, reaperSA, changeImage, false},
		{"a reaper cannot add a brief NoExecute toleration", generic, reaperSA, tolerateBriefly, false},
		{"a reaper that may debug cannot add an ephemeral container targeting the runner", generic, debugger, addDebugger, false},
		{"nor kubectl debug a busy ARC runner", scaleSet, debugger, addDebugger, false},
		{"a vertical autoscaler cannot shrink a busy runner container", onResizableNode(generic), vpa, shrinkCPU, false},
		{"nor a busy GitLab build container", onResizableNode(gitlab), vpa, shrinkCPU, false},
		{"an operator granted the override may shorten the deadline", generic, operator, shortenDeadline, true},
		{"an operator granted the override may debug a busy runner", generic, operator, addDebugger, true},
		{"once an operator set the override, anyone may change it", overridden, reaperSA, changeImage, true},
		{"ARC's controller, trusted with its fleet, is not refused", scaleSet, arc, tolerateBriefly, true},
		{"a runner that has not started is not protected", notStarted, reaperSA, shortenDeadline, true},
		{"a runner that has ended is not protected", ended, reaperSA, changeImage, true},
		{"a runner that has ended may be resized", onResizableNode(endedRunning), vpa, shrinkCPU, true},
		{"an operator granted the override may resize a busy runner", onResizableNode(generic), operator, shrinkCPU, true},
		{"a vertical autoscaler cannot shrink GitLab's helper beside a busy build container", onResizableNode(gitlabHelper), vpa, shrinkHelper, false},
		{"nor ARC's dind sidecar beside a busy runner", onResizableNode(scaleSetDind), vpa, shrinkSidecar, false},
		{"nor a busy runner pod's pod-level resources", onResizableNode(podLevel), vpa, shrinkPodLevel, false},
		{"an operator granted the override may shrink the pod-level resources", onResizableNode(podLevel), operator, shrinkPodLevel, true},
		{"GitLab's helper may be resized once the build container ended", onResizableNode(func(name string) *corev1.Pod {
			return sizedAs(sized(podtest.GitLab(ns, name)), "helper").Terminated("build", 0, "Completed").Running("helper").Obj()
		}), vpa, shrinkHelper, true},
	}
	var refused []auditedRefusal
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.change.needs != nil {
				apitest.RequireServer(t, cs.Discovery(), *tc.change.needs)
			}
			pod := create(t, nil, tc.pod(podName(i)))
			err := tc.change.apply(t, tc.by.client(t), pod)
			if tc.allowed {
				require.NoError(t, err)
				return
			}
			requireRefusedByPolicy(t, err, tc.change.refusal)
			assert.True(t, alive(t, pod))
			requireAuditedRefusal(t, tc.by, pod, tc.change.refusal)
			refused = append(refused, auditedRefusal{Pod: pod.Name, NS: pod.Namespace, As: tc.by.user})
		})
	}

	t.Run("the operators' audit query lists each refusal and its requester", func(t *testing.T) {
		if len(refused) == 0 {
			t.Skip("no refusal ran (-run left them out)")
		}
		listed := runDocumentedAuditQuery(t)
		for _, want := range refused {
			assert.True(t, slices.ContainsFunc(listed, func(got auditedRefusal) bool {
				return got.Pod == want.Pod && got.NS == want.NS && got.As == want.As && got.User != "" && got.At != ""
			}), "the query lists %s/%s refused as %s; it listed %+v", want.NS, want.Pod, want.As, listed)
		}
	})

	t.Run("a runner pod is still created with a deadline and tolerations of its own", func(t *testing.T) {
		w := sized(podtest.Runner(ns, "own-deadline"))
		w.Spec.ActiveDeadlineSeconds = ptr.To(int64(3600))
		w.Spec.Tolerations = []corev1.Toleration{{Key: "ci", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(60))}}
		create(t, ciJob.client(t), w.Obj())
	})
}

// requireAuditedRefusal waits for the API server's audit log to hold p's
// refused write of pod: what no webhook sees is kept there, with its
// requester and the policy's message.
func requireAuditedRefusal(t *testing.T, p principal, pod *corev1.Pod, refusal string) {
	t.Helper()
	requester := func(e auditv1.Event) string {
		if e.ImpersonatedUser != nil {
			return e.ImpersonatedUser.Username
		}
		return e.User.Username
	}
	var got []auditv1.Event
	require.Eventually(t, func() bool {
		var err error
		got, err = apitest.Audited(auditLog, func(e auditv1.Event) bool {
			return e.ObjectRef != nil && e.ObjectRef.Namespace == pod.Namespace && e.ObjectRef.Name == pod.Name &&
				requester(e) == p.user && e.Annotations[apitest.PolicyDenied] != ""
		})
		require.NoError(t, err)
		return len(got) > 0
	}, 30*time.Second, 100*time.Millisecond, "the refusal of %s is in the audit log", p.user)
	assert.Contains(t, got[0].Annotations[apitest.PolicyDenied], refusal)
	assert.Equal(t, int32(403), got[0].ResponseStatus.Code)
}

// auditedRefusal is a line of the operators' audit query
// (docs/operations/cli.md, refusals).
type auditedRefusal struct {
	User string `json:"user"`
	As   string `json:"as"`
	Pod  string `json:"pod"`
	NS   string `json:"ns"`
	At   string `json:"at"`
}

// runDocumentedAuditQuery runs the jq line docs/operations/cli.md gives
// operators over the suite's audit log, as written there but for the
// log's path, and returns what it lists.
func runDocumentedAuditQuery(t *testing.T) []auditedRefusal {
	t.Helper()
	root, err := apitest.RepoRoot()
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations", "cli.md"))
	require.NoError(t, err)
	const first, last = "    jq -c '", "' /var/log/kubernetes/audit.log"
	text := string(doc)
	start := strings.Index(text, first)
	require.GreaterOrEqual(t, start, 0, "docs/operations/cli.md has no line starting %q", first)
	end := strings.Index(text[start:], last)
	require.Greater(t, end, 0, "the jq line of docs/operations/cli.md ends with %q", last)
	program := text[start+len(first) : start+end]
	out, err := exec.Command("jq", "-c", program, auditLog).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("jq: %v: %s", err, exit.Stderr)
	}
	require.NoError(t, err, "jq (hack/debian.sh installs it)")
	var listed []auditedRefusal
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var r auditedRefusal
		require.NoError(t, json.Unmarshal([]byte(line), &r), "jq's line %q", line)
		listed = append(listed, r)
	}
	return listed
}

// connect opens pods/<subresource> of pod as p, for container (none when
// empty; for a proxy, the [scheme:]pod[:port] it names, the pod when
// empty), and returns the API server's answer. The suite has no kubelet:
// a connection the admission chain lets through fails afterwards, at the
// node; a refusal comes from admission, first.
func connect(t *testing.T, p principal, pod *corev1.Pod, subresource, container string) error {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: p.user, Groups: p.groups}
	cfg.WarningHandler = rest.NoWarnings{}
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	name := pod.Name
	if subresource == "proxy" && container != "" {
		name = container // a proxy names [scheme:]pod[:port] instead
	}
	req := c.CoreV1().RESTClient().Post().Namespace(pod.Namespace).Resource("pods").Name(name).SubResource(subresource)
	switch subresource {
	case "exec":
		req = req.VersionedParams(&corev1.PodExecOptions{Container: container, Command: []string{"kill", "1"}, Stdout: true}, scheme.ParameterCodec)
	case "attach":
		req = req.VersionedParams(&corev1.PodAttachOptions{Container: container, Stdout: true}, scheme.ParameterCodec)
	case "portforward":
		req = req.VersionedParams(&corev1.PodPortForwardOptions{Ports: []int32{2375}}, scheme.ParameterCodec)
	case "proxy":
		req = req.Suffix("containers", "json")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return req.Do(ctx).Error()
}

// connectCalls counts the connect reviews the guard answered while f ran,
// once it has counted at least want of them: the server counts a review
// after its answer is written, which the API server may have passed on
// first. A review counted later than that shows in the next count.
func connectCalls(t *testing.T, want float64, f func()) float64 {
	t.Helper()
	before, err := server.WebhookCalls(registration.ConnectPath)
	require.NoError(t, err)
	f()
	var after float64
	require.Eventually(t, func() bool {
		after, err = server.WebhookCalls(registration.ConnectPath)
		require.NoError(t, err)
		return after-before >= want
	}, patience, 20*time.Millisecond, "the guard counts the reviews it answered")
	return after - before
}

// exec, attach, port-forward and proxy into any container of a busy
// runner pod reach the job (its docker daemon, its work volume, its
// processes): refused to every principal but the job's owner (GitLab's
// manager runs the job's script so), the override's holders and the
// exempt. The API server sends the guard every connection to a pod in a
// selected namespace but the override holders' and the exempt's.
func TestExecIntoABusyRunnerIsRefusedButToItsOwner(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount(reaper), "edit")
	manager := may(t, ns, serviceAccount(ownerPrincipal), "edit")
	operator := may(t, ns, person("olga@example.com"), "edit")
	mayOverride(t, ns, operator)

	busy := create(t, nil, running(podtest.Runner(ns, "busy"), "runner"))
	build := create(t, nil, running(podtest.GitLab(ns, "build").Running("helper"), "build"))
	// No EphemeralRunner to say the runner is idle: taken as busy.
	arc := create(t, nil, running(podtest.ARCScaleSet(ns, "arc").SidecarRunning("dind"), "runner"))
	fresh := create(t, nil, podtest.Runner(ns, "fresh").Obj())
	web := create(t, nil, podtest.Plain(ns, "web").Running("app").Obj())

	const (
		intoRunner = "into runner container"
		toPod      = "to pod"
	)
	cases := []struct {
		name        string
		by          principal
		pod         *corev1.Pod
		subresource string
		container   string
		// refused is what the refusal says; "" when allowed.
		refused string
		calls   float64
	}{
		{"a reaper's exec into a busy runner is refused", reaperSA, busy, "exec", "runner", intoRunner, 1},
		{"naming no container does not get past it", reaperSA, busy, "exec", "", intoRunner, 1},
		{"a reaper's attach into a busy GitLab build container is refused", reaperSA, build, "attach", "build", intoRunner, 1},
		{"a reaper's exec into GitLab's helper beside a busy build container is refused", reaperSA, build, "exec", "helper", `into container "helper"`, 1},
		{"a reaper's exec into ARC's dind sidecar beside a busy runner is refused", reaperSA, arc, "exec", "dind", `into container "dind"`, 1},
		{"a reaper's port-forward to a busy runner pod is refused", reaperSA, arc, "portforward", "", toPod, 1},
		{"a reaper's proxied request to a port of a busy runner pod is refused", reaperSA, build, "proxy", "build:2375", toPod, 1},
		{"naming a scheme does not get a proxied request past it", reaperSA, build, "proxy", "https:build:2376", toPod, 1},
		{"GitLab's manager attaches to run the job's script", manager, build, "attach", "build", "", 1},
		{"GitLab's manager execs into the build container", manager, build, "exec", "build", "", 1},
		{"GitLab's manager execs into the helper container", manager, build, "exec", "helper", "", 1},
		{"the manager of GitLab jobs is no owner of a generic runner", manager, busy, "exec", "runner", intoRunner, 1},
		{"an operator granted the override is let through at the API server", operator, busy, "exec", "runner", "", 0},
		{"an operator's port-forward too", operator, arc, "portforward", "", "", 0},
		{"exec into a runner not started yet is allowed", reaperSA, fresh, "exec", "runner", "", 1},
		{"exec into a pod that is no runner is allowed", reaperSA, web, "exec", "app", "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := connectCalls(t, tc.calls, func() { err = connect(t, tc.by, tc.pod, tc.subresource, tc.container) })
			assert.Equal(t, tc.calls, n, "reviews the guard answered")
			require.Error(t, err, "the suite has no kubelet to connect to")
			if tc.refused != "" {
				assert.True(t, apierrors.IsForbidden(err), "403, not %v", err)
				assert.Contains(t, err.Error(), "refused "+tc.subresource+" "+tc.refused)
				return
			}
			assert.False(t, strings.Contains(err.Error(), "runnerguard"), "not refused by runnerguard: %v", err)
		})
	}
}
