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

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
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
	rounds := apitest.EnvInt("LOAD_ROUNDS", 300)
	warmup := min(maxWarmup, rounds)
	report.Rounds = rounds
	pods := fast.CoreV1()

	// CREATE of a runner pod: no webhook, a mutating webhook that does
	// nothing (registered as the injector is), the injector, and the
	// injection as the chart's MutatingAdmissionPolicy; and of a
	// pod the injector leaves alone, which its matchConditions keep from
	// it at the API server.
	const nothingSetup, plain = "mutating webhook that does nothing", ", not a runner pod"
	createSetups := []struct {
		name, ns, base string
		runner         bool
	}{
		{"no webhook", nsNone, "", true},
		{nothingSetup, nsNothing, "no webhook", true},
		{"runnerguard inject", nsGuard, "no webhook", true},
		{"runnerguard inject policy", nsInjectPolicy, "no webhook", true},
		{"no webhook" + plain, nsNone, "", false},
		{"runnerguard inject" + plain, nsGuard, "no webhook" + plain, false},
	}
	newPod := func(ns, name string, runner bool) *corev1.Pod {
		if runner {
			return newRunner(ns, name)
		}
		pod := podtest.Plain(ns, "plain-"+name).Obj()
		pod.UID = ""
		return pod
	}
	// The API server takes up a policy a moment after it is stored.
	require.Eventually(t, func() bool {
		got, err := pods.Pods(nsInjectPolicy).Create(ctx, newRunner(nsInjectPolicy, "probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && len(got.Spec.InitContainers) > 0
	}, time.Minute, 100*time.Millisecond, "the injection policy instruments runner pods")
	creates := make([][]time.Duration, len(createSetups))
	var instrumented *corev1.Pod
	for r := -warmup; r < rounds; r++ {
		for i := range createSetups {
			s := (r + warmup + i) % len(createSetups)
			setup := createSetups[s]
			var got *corev1.Pod
			d, err := timed(func() (err error) {
				got, err = pods.Pods(setup.ns).Create(ctx, newPod(setup.ns, fmt.Sprintf("c%d", r+warmup), setup.runner), metav1.CreateOptions{})
				return err
			})
			require.NoError(t, err, "create in %s", setup.name)
			// The do-nothing webhook must leave the pod as it came, the
			// injector instrument runner pods only.
			instrumentedHere := (setup.ns == nsGuard || setup.ns == nsInjectPolicy) && setup.runner
			require.Equal(t, instrumentedHere, len(got.Spec.InitContainers) > 0, "vitals sidecar in %s", setup.name)
			if instrumentedHere && setup.ns == nsGuard {
				instrumented = got
			}
			if r >= 0 {
				creates[s] = append(creates[s], d)
			}
		}
	}
	// Reviews per pod, counted one setup at a time.
	createCalls := make([]*Reviews, len(createSetups))
	for s, setup := range createSetups {
		if setup.ns == nsNone {
			continue
		}
		stats := func() (float64, float64, error) { return server.WebhookStats(registration.InjectPath) }
		if setup.ns == nsNothing {
			stats = nothing.stats
		}
		c := reviewsDuring(t, stats, countWindow, func() {
			for i := range countWindow {
				_, err := pods.Pods(setup.ns).Create(ctx, newPod(setup.ns, fmt.Sprintf("n%d", i), setup.runner), metav1.CreateOptions{})
				require.NoError(t, err)
			}
		})
		createCalls[s] = &c
	}
	for s, setup := range createSetups {
		report.AddLatency("pod CREATE", setup.name, creates[s], createCalls[s], setup.base)
	}
	// The injector against the do-nothing webhook: its own cost beyond
	// any mutating webhook's.
	none, nop, inject, policy := creates[0], creates[1], creates[2], creates[3]
	report.Notes = append(report.Notes, fmt.Sprintf("pod CREATE p50: runnerguard inject %s against the %s; the %s %s against no webhook; the injection policy %s against no webhook",
		p50Added(inject, nop), nothingSetup, nothingSetup, p50Added(nop, none), p50Added(policy, none)))
	for _, ns := range []string{nsNone, nsNothing, nsGuard, nsInjectPolicy} {
		removeAll(t, ns)
	}

	// DELETE of runner pods the guard allows, bound to a node: identical
	// instrumented pods in every setup, whose runner has ended (the guard
	// writes a death Event) or never started (the guard writes nothing).
	// The client's delete sets deletionTimestamp; the kubelet's final
	// delete removes the pod once its containers stopped.
	const ended, notStarted, overridden = "runner ended", "runner not started", "running, overridden"
	setups := []struct {
		name, ns, kind, base string
	}{
		{"no webhook", nsNone, ended, ""},
		{"runnerguard guard", nsGuard, ended, "no webhook"},
		{"guard without matchConditions", nsNoMatch, ended, "no webhook"},
		{"ValidatingAdmissionPolicy", nsVAP, ended, "no webhook"},
		{"no webhook, " + notStarted, nsNone, notStarted, ""},
		{"runnerguard guard, " + notStarted, nsGuard, notStarted, "no webhook, " + notStarted},
		// The deletes the guard judges and allows: a running runner with
		// the override, whose deleter it notes for the record (a pod GET to
		// confirm the review, a RunnerDeletion create, an Event).
		{"no webhook, " + overridden, nsNone, overridden, ""},
		{"runnerguard guard, " + overridden, nsGuard, overridden, "no webhook, " + overridden},
	}
	total := warmup + rounds + countWindow
	subjects := make([][]*corev1.Pod, len(setups))
	for s, setup := range setups {
		for i := range total {
			pod, status := subjectFrom(instrumented, setup.ns, fmt.Sprintf("ended-%d", i))
			switch setup.kind {
			case notStarted:
				pod.Name, status = fmt.Sprintf("unstarted-%d", i), corev1.PodStatus{Phase: corev1.PodPending}
			case overridden:
				pod.Name = fmt.Sprintf("overridden-%d", i)
				pod.Annotations[runnerpod.AllowDelete] = "load test"
				w := podtest.Wrapper{Pod: *pod.DeepCopy()}
				status = w.Running("runner").Status
			}
			subjects[s] = append(subjects[s], createWithStatus(ctx, t, pod, status))
		}
	}
	kl := as(t, kubelet)
	deletes, finals := make([][]time.Duration, len(setups)), make([][]time.Duration, len(setups))
	for _, step := range []struct {
		times [][]time.Duration
		do    func(*corev1.Pod) error
	}{
		{deletes, func(p *corev1.Pod) error { return pods.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}) }},
		{finals, func(p *corev1.Pod) error { return finalDelete(ctx, kl, p) }},
	} {
		for r := -warmup; r < rounds; r++ {
			for i := range setups {
				s := (r + warmup + i) % len(setups)
				d, err := timed(func() error { return step.do(subjects[s][r+warmup]) })
				require.NoError(t, err, "delete in %s", setups[s].name)
				if r >= 0 {
					step.times[s] = append(step.times[s], d)
				}
			}
		}
	}
	// Reviews per pod, counted one setup at a time.
	calls, finalCalls := make([]*Reviews, len(setups)), make([]*Reviews, len(setups))
	for s := range setups {
		if setups[s].ns != nsGuard && setups[s].ns != nsNoMatch {
			continue
		}
		window := subjects[s][warmup+rounds:]
		c := webhookReviews(t, registration.GuardPath, countWindow, func() {
			for _, p := range window {
				require.NoError(t, pods.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}))
			}
		})
		f := webhookReviews(t, registration.GuardPath, countWindow, func() {
			for _, p := range window {
				require.NoError(t, finalDelete(ctx, kl, p))
			}
		})
		calls[s], finalCalls[s] = &c, &f
	}
	for s, setup := range setups {
		report.AddLatency("pod DELETE", setup.name, deletes[s], calls[s], setup.base)
	}
	for s, setup := range setups {
		report.AddLatency("final DELETE (kubelet)", setup.name, finals[s], finalCalls[s], setup.base)
	}
	for _, ns := range []string{nsNone, nsGuard, nsNoMatch, nsVAP} {
		removeAll(t, ns)
	}
}
