//go:build node

package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// reaper is the fleet's own cleanup worker, the usual killer of busy
// runners.
const reaper = "system:serviceaccount:ci-infra:orphan-reaper"

// runnerLabel marks the suite's runner pods, so a drain can pick them.
const runnerLabel = "e2e.runnerguard.io/runner"

// newNamespace makes an opted-in namespace, deleted after the test.
func newNamespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   "node-" + strings.ToLower(rand.String(6)),
		Labels: map[string]string{runnerpod.EnabledNamespaceLabel: "true"},
	}}
	require.NoError(t, admin.Create(context.Background(), ns))
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
	return ns.Name
}

// runnerPod is a generic pool's runner pod running the stand-in with args
// (see e2e/images/runner/runner.sh) under a memory limit.
func runnerPod(ns, name, memory string, args ...string) *corev1.Pod {
	p := podtest.Runner(ns, name).Obj()
	p.UID = ""
	p.Labels = map[string]string{runnerLabel: ns}
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	c := &p.Spec.Containers[0]
	c.Image, c.ImagePullPolicy, c.Args = runnerImage, corev1.PullNever, args
	c.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}
	return p
}

// start creates pod and waits until its runner container runs.
func start(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	require.NoError(t, admin.Create(context.Background(), pod))
	return waitPod(t, pod, "the runner to start", 60*time.Second, func(p *corev1.Pod) bool {
		s := containerStatus(p, "runner")
		return s != nil && (s.State.Running != nil || s.State.Terminated != nil)
	})
}

// waitPod polls pod until cond holds and returns it.
func waitPod(t *testing.T, pod *corev1.Pod, what string, timeout time.Duration, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	got := &corev1.Pod{}
	require.Eventually(t, func() bool {
		if err := admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got); err != nil {
			return false
		}
		return cond(got)
	}, timeout, 250*time.Millisecond, "waiting for %s of %s/%s", what, pod.Namespace, pod.Name)
	return got
}

// finished is a pod whose runner ended, whose vitals sidecar has left its
// final reading (the kubelet stops the sidecar after the runner) and whose
// phase says so.
func finished(p *corev1.Pod) bool {
	r, v := containerStatus(p, "runner"), containerStatus(p, runnerpod.VitalsContainer)
	return r != nil && r.State.Terminated != nil && v != nil && v.State.Terminated != nil &&
		(p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// logs returns a container's log.
func logs(t *testing.T, pod *corev1.Pod, container string) string {
	t.Helper()
	b, err := cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: container}).
		DoRaw(context.Background())
	require.NoError(t, err, "logs of %s/%s %s", pod.Namespace, pod.Name, container)
	return string(b)
}

// deathRecords reads the RunnerDeath records of pod (by its UID).
func deathRecords(t *testing.T, pod *corev1.Pod) []death.Record {
	t.Helper()
	list := &v1alpha1.RunnerDeathList{}
	require.NoError(t, admin.List(context.Background(), list, client.InNamespace(pod.Namespace),
		client.MatchingLabels{death.PodUIDLabel: string(pod.UID)}))
	var out []death.Record
	for i := range list.Items {
		out = append(out, death.FromObject(&list.Items[i]))
	}
	return out
}

// as returns a client acting as user; system:masters lets it act, the
// webhooks see the username.
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	require.NoError(t, err)
	return c
}

// podEvents lists the events.k8s.io Events about a pod.
func podEvents(t *testing.T, pod *corev1.Pod) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	require.NoError(t, admin.List(context.Background(), list, client.InNamespace(pod.Namespace)))
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "Pod" && e.Regarding.Name == pod.Name {
			out = append(out, e)
		}
	}
	return out
}
