//go:build fleets

package fleets

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
)

// syncList is a list that parallel tests append to.
type syncList[T any] struct {
	mu    sync.Mutex
	items []T
}

func (l *syncList[T]) add(v T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, v)
}

// all is a copy of the list so far.
func (l *syncList[T]) all() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]T(nil), l.items...)
}

// jobIDAnnotation is where GitLab Runner names the job on its build pod.
const jobIDAnnotation = "job.runner.gitlab.com/id"

// podRef is a build pod as it was while it ran.
type podRef struct {
	namespace, name string
	uid             types.UID
	startTime       metav1.Time
}

// buildPod waits for the build pod of job id, with its build container
// running.
func buildPod(t *testing.T, m *manager, id int64) podRef {
	t.Helper()
	var ref podRef
	require.Eventually(t, func() bool {
		list := &corev1.PodList{}
		if admin.List(context.Background(), list, client.InNamespace(m.buildNS)) != nil {
			return false
		}
		for _, p := range list.Items {
			if p.Annotations[jobIDAnnotation] != strconv.FormatInt(id, 10) || p.Status.StartTime == nil {
				continue
			}
			for _, s := range p.Status.ContainerStatuses {
				if s.Name == "build" && s.State.Running != nil {
					ref = podRef{namespace: p.Namespace, name: p.Name, uid: p.UID, startTime: *p.Status.StartTime}
					return true
				}
			}
		}
		return false
	}, 3*time.Minute, 250*time.Millisecond, "the build pod of job %d to run (manager log: %s)", id, m.log)
	return ref
}

// gone waits until the pod is deleted (the job over, as its manager ends
// it). A pod of the same name with another UID is not it: ARC gives a
// runner that is not done a new pod of the same name.
func gone(t *testing.T, pod podRef) {
	t.Helper()
	require.Eventually(t, func() bool {
		p := &corev1.Pod{}
		err := admin.Get(context.Background(), client.ObjectKey{Namespace: pod.namespace, Name: pod.name}, p)
		return apierrors.IsNotFound(err) || (err == nil && p.UID != pod.uid)
	}, 4*time.Minute, 500*time.Millisecond, "pod %s/%s to go", pod.namespace, pod.name)
}

// deathRecords waits for and reads the RunnerDeath records of pod.
func deathRecords(t *testing.T, pod podRef) []death.Record {
	t.Helper()
	list := &v1alpha1.RunnerDeathList{}
	require.Eventually(t, func() bool {
		return admin.List(context.Background(), list, client.InNamespace(pod.namespace),
			client.MatchingLabels{death.PodUIDLabel: string(pod.uid)}) == nil && len(list.Items) > 0
	}, 2*time.Minute, 500*time.Millisecond, "the death record of %s/%s", pod.namespace, pod.name)
	var out []death.Record
	for i := range list.Items {
		out = append(out, death.FromObject(&list.Items[i]))
	}
	return out
}

// as returns a clientset acting as user; system:masters lets it act, the
// webhooks see the username.
func as(t *testing.T, user string) *kubernetes.Clientset {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return c
}

func deleteOptions() metav1.DeleteOptions { return metav1.DeleteOptions{} }

func isForbidden(err error) bool { return apierrors.IsForbidden(err) }

// waitEvent waits for an Event with reason about pod whose note names who.
func waitEvent(t *testing.T, ns, pod, reason, who string) {
	t.Helper()
	require.Eventually(t, func() bool {
		list := &eventsv1.EventList{}
		if admin.List(context.Background(), list, client.InNamespace(ns)) != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Regarding.Name == pod && e.Reason == reason && strings.Contains(e.Note, who) {
				return true
			}
		}
		return false
	}, time.Minute, 250*time.Millisecond, "a %s Event on %s naming %s", reason, pod, who)
}

// runnerguardDeaths is `kubectl runnerguard deaths -n ns`'s output.
func runnerguardDeaths(t *testing.T, ns string) string {
	t.Helper()
	out, err := exec.Command(runnerguardCLI, "deaths", "-n", ns, "--kubeconfig", kubeconfigPath).CombinedOutput()
	require.NoError(t, err, "runnerguard deaths: %s", out)
	return string(out)
}

// runnerguardWhy is `kubectl runnerguard why POD -n ns`'s output.
func runnerguardWhy(t *testing.T, ns, pod string) string {
	t.Helper()
	out, err := exec.Command(runnerguardCLI, "why", pod, "-n", ns, "--kubeconfig", kubeconfigPath).CombinedOutput()
	require.NoError(t, err, "runnerguard why: %s", out)
	return string(out)
}

// runnerguardRefusals is `kubectl runnerguard refusals POD -n ns`'s output.
func runnerguardRefusals(ns, pod string) (string, error) {
	out, err := exec.Command(runnerguardCLI, "refusals", pod, "-n", ns, "--kubeconfig", kubeconfigPath).CombinedOutput()
	return string(out), err
}

// artifact is a file kept in e2e/.artifacts/fleets after the run.
func artifact(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(repoRoot, "e2e", ".artifacts", "fleets")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return filepath.Join(dir, name)
}

// keepDiagnostics keeps what explains a failed layout: the refusals on
// record in ns and the guard's logs.
func keepDiagnostics(t *testing.T, ns, layout string) {
	out, err := exec.Command(runnerguardCLI, "refusals", "-n", ns, "--kubeconfig", kubeconfigPath).CombinedOutput()
	t.Logf("kubectl runnerguard refusals -n %s (err %v):\n%s", ns, err, out)
	pods, err := cs.CoreV1().Pods(releaseNamespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Logf("listing the guard's pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		b, err := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(context.Background())
		if err != nil {
			t.Logf("logs of %s: %v", p.Name, err)
			continue
		}
		f := artifact(t, "guard-"+layout+"-"+p.Name+".log")
		_ = os.WriteFile(f, b, 0o644)
		t.Logf("the guard's log %s kept in %s", p.Name, f)
	}
}
