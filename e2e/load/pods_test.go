//go:build load

package load

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// node is where the run's pods are bound: a bound pod is deleted
// gracefully (deletionTimestamp first), as runner pods are.
const node = "node-load"

// envInt reads a positive integer from the environment, or def.
// newRunner is a generic pool's runner pod as its controller creates it.
func newRunner(ns, name string) *corev1.Pod {
	pod := podtest.Runner(ns, name).Obj()
	pod.UID = ""
	return pod
}

// subjectFrom is a pod shaped like instrumented (as the injector left it)
// with its runner terminated, bound to node: the guard allows its delete.
// It opts out of injection so that every namespace holds the same pod.
func subjectFrom(instrumented *corev1.Pod, ns, name string) (*corev1.Pod, corev1.PodStatus) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: instrumented.Labels, Annotations: map[string]string{}}}
	for k, v := range instrumented.Annotations {
		pod.Annotations[k] = v
	}
	pod.Annotations[runnerpod.Inject] = "false"
	pod.Spec = *instrumented.Spec.DeepCopy()
	pod.Spec.NodeName = node
	w := podtest.Wrapper{Pod: *pod.DeepCopy()}
	w.Running("runner").Terminated("runner", 0, "Completed")
	return pod, w.Status
}

// createWithStatus creates pod and writes status as the kubelet would.
func createWithStatus(ctx context.Context, t *testing.T, pod *corev1.Pod, status corev1.PodStatus) *corev1.Pod {
	t.Helper()
	got, err := fast.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	// The leader may patch the new pod's marks in between (an idle runner's
	// safe-to-evict "true"): write the status on the latest copy, as the
	// kubelet's own status manager retries.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		latest, err := fast.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		latest.Status = status
		got, err = fast.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, latest, metav1.UpdateOptions{})
		return err
	}))
	return got
}

// timed runs f and returns how long it took.
func timed(f func() error) (time.Duration, error) {
	start := time.Now()
	err := f()
	return time.Since(start), err
}

// Reviews is what the server did on one path while some operations ran.
type Reviews struct {
	// PerOp is the reviews per operation.
	PerOp float64
	// Handling is the server's mean time per review, from receiving it to
	// writing the answer (controller-runtime's latency histogram).
	Handling time.Duration
	// Requests are the API requests runnerguard's server made per review
	// while the operations ran and until its work after them was done,
	// by verb and resource, from the API server's audit log; nil where
	// not counted (another server's reviews).
	Requests map[string]float64
}

// webhookReviews counts the reviews the server answered on path while ops
// operations ran in f, and the API requests it made meanwhile.
func webhookReviews(t *testing.T, path string, ops int, f func()) Reviews {
	t.Helper()
	var requests map[string]int
	r := reviewsDuring(t, func() (float64, float64, error) { return server.WebhookStats(path) }, ops, func() {
		requests = serverRequests(t, f)
	})
	reviews := r.PerOp * float64(ops)
	r.Requests = map[string]float64{}
	for k, n := range requests {
		if reviews > 0 {
			r.Requests[k] = float64(n) / reviews
		}
	}
	return r
}

// serverRequests counts the requests runnerguard's server made to the API
// server, by verb and resource, from when its earlier work was done until
// the work f set off was: the audit log (StartClusterAuditingServer)
// quiet for a while before and after. Requests from the server's own
// clocks (a resync, the leader's marks) may fall in the window too: the
// report names them.
func serverRequests(t *testing.T, f func()) map[string]int {
	t.Helper()
	from := quietAudit(t)
	f()
	to := quietAudit(t)
	raw, err := os.ReadFile(cluster.AuditLog)
	require.NoError(t, err)
	out := map[string]int{}
	for _, line := range bytes.Split(raw[from:to], []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var e auditv1.Event
		require.NoError(t, json.Unmarshal(line, &e))
		if e.User.Username != apitest.ServerUser || e.ObjectRef == nil || e.Stage != auditv1.StageResponseComplete {
			continue
		}
		what := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			what += "/" + e.ObjectRef.Subresource
		}
		out[e.Verb+" "+what]++
	}
	return out
}

// quietAudit waits until the audit log has not grown for auditQuiet (at
// most auditSettle) and returns its size.
func quietAudit(t *testing.T) int64 {
	t.Helper()
	size := func() int64 {
		fi, err := os.Stat(cluster.AuditLog)
		require.NoError(t, err)
		return fi.Size()
	}
	last, since, start := size(), time.Now(), time.Now()
	for time.Since(since) < auditQuiet && time.Since(start) < auditSettle {
		time.Sleep(50 * time.Millisecond)
		if s := size(); s != last {
			last, since = s, time.Now()
		}
	}
	return last
}

// A review's work after its answer is done within auditQuiet of its last
// request (a note waits for its pod's deletion in the cache, not through
// the API; a pod's refusals are written once they settle, in less); the
// log is read after at most auditSettle.
const (
	auditQuiet  = 1500 * time.Millisecond
	auditSettle = 15 * time.Second
)

// reviewsDuring counts the reviews a server answered, by its stats (calls
// and seconds so far), while ops operations ran in f. The counters are
// read a moment after f, as controller-runtime counts a review once its
// answer is written.
func reviewsDuring(t *testing.T, stats func() (calls, seconds float64, err error), ops int, f func()) Reviews {
	t.Helper()
	calls0, secs0, err := stats()
	require.NoError(t, err)
	f()
	time.Sleep(200 * time.Millisecond)
	calls, secs, err := stats()
	require.NoError(t, err)
	r := Reviews{PerOp: (calls - calls0) / float64(ops)}
	if calls > calls0 {
		r.Handling = time.Duration((secs - secs0) / (calls - calls0) * float64(time.Second))
	}
	return r
}

// as is a client acting as user (in system:masters, so RBAC never
// refuses it: the webhooks see the username).
func as(t *testing.T, user string) *kubernetes.Clientset {
	t.Helper()
	rc := rest.CopyConfig(cluster.Config)
	rc.QPS = -1
	rc.ContentType, rc.AcceptContentTypes = "application/json", "application/json"
	rc.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:masters", "system:authenticated"}}
	c, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	return c
}

// kubelet is the node's kubelet, whose final delete (grace 0, UID
// precondition) removes a terminating pod once its containers stopped.
const kubelet = "system:node:" + node

// finalDelete is the kubelet's removal of a terminating pod.
func finalDelete(ctx context.Context, c *kubernetes.Clientset, pod *corev1.Pod) error {
	return c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &pod.UID},
	})
}

// removeAll removes every pod of ns at once, as the namespace controller,
// an exempt principal.
func removeAll(t *testing.T, ns string) {
	t.Helper()
	err := as(t, config.NamespaceController).CoreV1().Pods(ns).DeleteCollection(context.Background(),
		metav1.DeleteOptions{GracePeriodSeconds: new(int64)}, metav1.ListOptions{})
	require.NoError(t, err, fmt.Sprintf("removing the pods of %s", ns))
}
