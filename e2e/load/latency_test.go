//go:build load

package load

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/webhook/podtest"
	"github.com/runnerguard/runnerguard/webhook/registration"
)

// maxWarmup rounds (fewer for a short run) run before the timed ones,
// untimed: connections, caches and the API server's view of the webhook
// configurations settle.
const maxWarmup = 20

// countWindow is how many operations the webhook calls are counted over,
// one setup at a time, so each count belongs to one setup.
const countWindow = 20

// TestBusyRunnerDeleteIsRefusedByEachGuardSetup checks the setups before
// they are timed: each refuses what the guard refuses, and the baseline
// refuses nothing.
func TestBusyRunnerDeleteIsRefusedByEachGuardSetup(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{nsGuard, nsNoMatch, nsVAP, nsNone} {
		busy := newRunner(ns, "busy")
		busy.Spec.NodeName = node
		w := podtest.Wrapper{Pod: *busy.DeepCopy()}
		createWithStatus(ctx, t, busy, w.RunningSince("runner", time.Now().Add(-time.Minute)).Status)
		// A binding takes effect a moment after it is created.
		var err error
		require.Eventually(t, func() bool {
			err = fast.CoreV1().Pods(ns).Delete(ctx, "busy", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			return (ns == nsNone) == (err == nil)
		}, 15*time.Second, 100*time.Millisecond, "delete of a busy runner in %s: %v", ns, err)
		if ns != nsNone {
			require.True(t, apierrors.IsForbidden(err), "%s: %v", ns, err)
		}
		removeAll(t, ns)
	}
}

// TestPodCreateAndDeleteLatency times pod CREATEs and allowed pod DELETEs
// one at a time, rotating through the setups round by round, so a drift in
// the machine's load affects every setup alike.
func TestPodCreateAndDeleteLatency(t *testing.T) {
	ctx := context.Background()
	rounds := envInt("LOAD_ROUNDS", 300)
	warmup := min(maxWarmup, rounds)
	report.Rounds = rounds
	pods := fast.CoreV1()

	// CREATE of a runner pod: no webhook, and the injector.
	creates := map[string][]time.Duration{}
	var instrumented *corev1.Pod
	createIn := []string{nsNone, nsGuard}
	for r := -warmup; r < rounds; r++ {
		for i := range createIn {
			ns := createIn[(r+warmup+i)%len(createIn)]
			var got *corev1.Pod
			d, err := timed(func() (err error) {
				got, err = pods.Pods(ns).Create(ctx, newRunner(ns, fmt.Sprintf("c%d", r+warmup)), metav1.CreateOptions{})
				return err
			})
			require.NoError(t, err)
			if ns == nsGuard {
				require.NotEmpty(t, got.Spec.InitContainers, "the injector added no vitals sidecar")
				instrumented = got
			}
			if r >= 0 {
				creates[ns] = append(creates[ns], d)
			}
		}
	}
	injectCalls := webhookCalls(t, registration.InjectPath, func() {
		for i := range countWindow {
			_, err := pods.Pods(nsGuard).Create(ctx, newRunner(nsGuard, fmt.Sprintf("n%d", i)), metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}) / countWindow
	report.AddLatency("pod CREATE", "no webhook", creates[nsNone], -1, true)
	report.AddLatency("pod CREATE", "runnerguard inject", creates[nsGuard], injectCalls, false)
	for _, ns := range createIn {
		removeAll(t, ns)
	}

	// DELETE of a runner pod the guard allows: identical instrumented
	// pods whose runner has ended, bound to a node, in every setup. The
	// client's delete sets deletionTimestamp; the kubelet's final delete
	// removes the pod once its containers stopped.
	deleteIn := []string{nsNone, nsGuard, nsNoMatch, nsVAP}
	total := warmup + rounds + countWindow
	subjects := map[string][]*corev1.Pod{}
	for _, ns := range deleteIn {
		for i := range total {
			pod, status := subjectFrom(instrumented, ns, fmt.Sprintf("d%d", i))
			subjects[ns] = append(subjects[ns], createWithStatus(ctx, t, pod, status))
		}
	}
	kl := as(t, kubelet)
	deletes, finals := map[string][]time.Duration{}, map[string][]time.Duration{}
	for _, step := range []struct {
		times map[string][]time.Duration
		do    func(*corev1.Pod) error
	}{
		{deletes, func(p *corev1.Pod) error { return pods.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}) }},
		{finals, func(p *corev1.Pod) error { return finalDelete(ctx, kl, p) }},
	} {
		for r := -warmup; r < rounds; r++ {
			for i := range deleteIn {
				ns := deleteIn[(r+warmup+i)%len(deleteIn)]
				d, err := timed(func() error { return step.do(subjects[ns][r+warmup]) })
				require.NoError(t, err, "delete in %s", ns)
				if r >= 0 {
					step.times[ns] = append(step.times[ns], d)
				}
			}
		}
	}
	// Reviews per pod, counted one setup at a time.
	calls, finalCalls := map[string]float64{}, map[string]float64{}
	for _, ns := range []string{nsGuard, nsNoMatch} {
		window := subjects[ns][warmup+rounds:]
		calls[ns] = webhookCalls(t, registration.GuardPath, func() {
			for _, p := range window {
				require.NoError(t, pods.Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}))
			}
		}) / countWindow
		finalCalls[ns] = webhookCalls(t, registration.GuardPath, func() {
			for _, p := range window {
				require.NoError(t, finalDelete(ctx, kl, p))
			}
		}) / countWindow
	}
	for _, op := range []struct {
		name  string
		times map[string][]time.Duration
		calls map[string]float64
	}{{"pod DELETE", deletes, calls}, {"final DELETE (kubelet)", finals, finalCalls}} {
		report.AddLatency(op.name, "no webhook", op.times[nsNone], -1, true)
		report.AddLatency(op.name, "runnerguard guard", op.times[nsGuard], op.calls[nsGuard], false)
		report.AddLatency(op.name, "guard without matchConditions", op.times[nsNoMatch], op.calls[nsNoMatch], false)
		report.AddLatency(op.name, "ValidatingAdmissionPolicy", op.times[nsVAP], -1, false)
	}
	for _, ns := range deleteIn {
		removeAll(t, ns)
	}
}
