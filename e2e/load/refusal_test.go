//go:build load

package load

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/e2e/internal/registration"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// TestRefusalsAndAllowedEvictionsAgainstTheirFloors times the two answers
// whose path should hold nothing but the decision: a refused DELETE of a
// busy runner, by the guard and by the same rule as a
// ValidatingAdmissionPolicy (the in-process floor), and an allowed
// eviction of a runner whose job has ended, by the guard and by a
// validating webhook that does nothing, registered as the guard's eviction
// webhook is. Setups interleaved round by round; the ratios of the p50s are
// printed under the table.
func TestRefusalsAndAllowedEvictionsAgainstTheirFloors(t *testing.T) {
	ctx := context.Background()
	rounds := apitest.EnvInt("LOAD_ROUNDS", 300)
	warmup := min(maxWarmup, rounds)
	report.Rounds = rounds
	pods := fast.CoreV1()

	// The pods are shaped as the injector leaves a runner pod (labelled,
	// so the guard's cache of runner pods holds them), the same in every
	// namespace.
	instrumented, err := pods.Pods(nsGuard).Create(ctx, newRunner(nsGuard, "shape"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, instrumented.Spec.InitContainers, "the injector instruments the shape")

	// Refused DELETEs: one busy runner a setup, refused every round.
	const refusedOp = "pod DELETE refused (busy runner)"
	const refuser = "validating webhook that refuses without looking"
	const reader = "validating webhook that decodes the pod, then refuses"
	refusedSetups := []struct{ name, ns, base string }{
		{"ValidatingAdmissionPolicy", nsVAP, ""},
		{"runnerguard guard", nsGuard, "ValidatingAdmissionPolicy"},
		{refuser, nsRefuser, "ValidatingAdmissionPolicy"},
		{reader, nsReader, "ValidatingAdmissionPolicy"},
	}
	busy := make([]*corev1.Pod, len(refusedSetups))
	for s, setup := range refusedSetups {
		pod, _ := subjectFrom(instrumented, setup.ns, "busy-refused")
		w := podtest.Wrapper{Pod: *pod.DeepCopy()}
		busy[s] = createWithStatus(ctx, t, pod, w.RunningSince("runner", time.Now().Add(-time.Minute)).Status)
	}
	refuse := func(p *corev1.Pod, dryRun ...string) error {
		err := pods.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{DryRun: dryRun})
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("the delete of busy runner %s/%s was not refused: %v", p.Namespace, p.Name, err)
		}
		return nil
	}
	// A binding takes effect a moment after it is created: dry runs until
	// it does (a delete let through would leave the pod terminating, which
	// no setup reviews).
	for _, p := range busy {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return refuse(p, metav1.DryRunAll) == nil, nil
		})
		require.NoError(t, errors.Join(err, refuse(p, metav1.DryRunAll)), "%s refuses", p.Namespace)
	}
	refusals := make([][]time.Duration, len(refusedSetups))
	for r := -warmup; r < rounds; r++ {
		for i := range refusedSetups {
			s := (r + warmup + i) % len(refusedSetups)
			d, err := timed(func() error { return refuse(busy[s]) })
			require.NoError(t, err)
			if r >= 0 {
				refusals[s] = append(refusals[s], d)
			}
		}
	}
	guardRefusals := webhookReviews(t, registration.GuardPath, countWindow, func() {
		for range countWindow {
			require.NoError(t, refuse(busy[1]))
		}
	})
	floorRefusals := make([]Reviews, len(refusedSetups))
	for _, s := range []int{2, 3} {
		floorRefusals[s] = reviewsDuring(t, nothing.stats, countWindow, func() {
			for range countWindow {
				require.NoError(t, refuse(busy[s]))
			}
		})
	}
	report.AddLatency(refusedOp, refusedSetups[0].name, refusals[0], nil, "")
	report.AddLatency(refusedOp, refusedSetups[2].name, refusals[2], &floorRefusals[2], refusedSetups[2].base)
	report.AddLatency(refusedOp, refusedSetups[3].name, refusals[3], &floorRefusals[3], refusedSetups[3].base)
	report.AddLatency(refusedOp, refusedSetups[1].name, refusals[1], &guardRefusals, refusedSetups[1].base)
	report.Notes = append(report.Notes, fmt.Sprintf("%s: guard p50 / ValidatingAdmissionPolicy p50 = %s (the policy decides in the API server: no Event, no record); %s p50 / ValidatingAdmissionPolicy p50 = %s (any webhook's floor); %s p50 / ValidatingAdmissionPolicy p50 = %s (the floor of any webhook that reads the pod); guard p50 / %s p50 = %s (goal: at most %.2fx); guard's reviews per refused DELETE %.2f (goal: 1); guard's server time per review / %s's = %s (goal: at most %.0fx)",
		refusedOp, p50Ratio(refusals[1], refusals[0]), refuser, p50Ratio(refusals[2], refusals[0]), reader, p50Ratio(refusals[3], refusals[0]), reader, p50Ratio(refusals[1], refusals[3]), refusalGoal,
		guardRefusals.PerOp, reader, handlingRatio(guardRefusals, floorRefusals[3]), handlingGoal))

	// Allowed evictions of runners whose job has ended: fresh pods each
	// round, as an eviction deletes its pod.
	const evictOp = "pod eviction allowed (runner ended)"
	const nothingEviction = "validating webhook that does nothing"
	evictSetups := []struct{ name, ns, base string }{
		{"no webhook", nsNone, ""},
		{nothingEviction, nsNothing, "no webhook"},
		{"runnerguard guard", nsGuard, nothingEviction},
	}
	total := warmup + rounds + countWindow
	subjects := make([][]*corev1.Pod, len(evictSetups))
	for s, setup := range evictSetups {
		for i := range total {
			pod, status := subjectFrom(instrumented, setup.ns, fmt.Sprintf("evicted-%d", i))
			subjects[s] = append(subjects[s], createWithStatus(ctx, t, pod, status))
		}
	}
	evict := func(p *corev1.Pod) error {
		return pods.Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}})
	}
	evictions := make([][]time.Duration, len(evictSetups))
	for r := -warmup; r < rounds; r++ {
		for i := range evictSetups {
			s := (r + warmup + i) % len(evictSetups)
			d, err := timed(func() error { return evict(subjects[s][r+warmup]) })
			require.NoError(t, err, "eviction in %s", evictSetups[s].name)
			if r >= 0 {
				evictions[s] = append(evictions[s], d)
			}
		}
	}
	evictCalls := make([]*Reviews, len(evictSetups))
	for s, setup := range evictSetups {
		var stats func() (float64, float64, error)
		switch setup.ns {
		case nsGuard:
			stats = func() (float64, float64, error) { return server.WebhookStats(registration.GuardPath) }
		case nsNothing:
			stats = nothing.stats
		default:
			continue
		}
		c := reviewsDuring(t, stats, countWindow, func() {
			for _, p := range subjects[s][warmup+rounds:] {
				require.NoError(t, evict(p))
			}
		})
		evictCalls[s] = &c
	}
	for s, setup := range evictSetups {
		report.AddLatency(evictOp, setup.name, evictions[s], evictCalls[s], setup.base)
	}
	report.Notes = append(report.Notes, fmt.Sprintf("%s: guard p50 / %s p50 = %s (goal: at most %.2fx); %s p50 / no webhook p50 = %s",
		evictOp, nothingEviction, p50Ratio(evictions[2], evictions[1]), evictionGoal, nothingEviction, p50Ratio(evictions[1], evictions[0])))

	// Allowed DELETEs that reach the guard: running runners with the
	// override, fresh pods each round (a delete leaves its pod
	// terminating), by the guard and by a validating webhook that does
	// nothing, registered as the guard's delete webhook is (its
	// matchConditions send it the same deletes).
	const allowedOp = "pod DELETE allowed (running, overridden)"
	const nothingDelete = "validating webhook that does nothing, as the guard's delete webhook"
	allowedSetups := []struct{ name, ns, base string }{
		{"no webhook", nsNone, ""},
		{nothingDelete, nsNothingDelete, "no webhook"},
		{"runnerguard guard", nsGuard, nothingDelete},
	}
	overridden := make([][]*corev1.Pod, len(allowedSetups))
	for s, setup := range allowedSetups {
		for i := range total {
			pod, _ := subjectFrom(instrumented, setup.ns, fmt.Sprintf("overridden-%d", i))
			pod.Annotations[runnerpod.AllowDelete] = "load test"
			w := podtest.Wrapper{Pod: *pod.DeepCopy()}
			overridden[s] = append(overridden[s], createWithStatus(ctx, t, pod, w.Running("runner").Status))
		}
	}
	del := func(p *corev1.Pod) error { return pods.Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{}) }
	allowedDeletes := make([][]time.Duration, len(allowedSetups))
	for r := -warmup; r < rounds; r++ {
		for i := range allowedSetups {
			s := (r + warmup + i) % len(allowedSetups)
			d, err := timed(func() error { return del(overridden[s][r+warmup]) })
			require.NoError(t, err, "delete in %s", allowedSetups[s].name)
			if r >= 0 {
				allowedDeletes[s] = append(allowedDeletes[s], d)
			}
		}
	}
	allowedCalls := make([]*Reviews, len(allowedSetups))
	for s, setup := range allowedSetups {
		window := func() {
			for _, p := range overridden[s][warmup+rounds:] {
				require.NoError(t, del(p))
			}
		}
		var c Reviews
		switch setup.ns {
		case nsGuard:
			c = webhookReviews(t, registration.GuardPath, countWindow, window)
		case nsNothingDelete:
			c = reviewsDuring(t, nothing.stats, countWindow, window)
		default:
			continue
		}
		allowedCalls[s] = &c
	}
	for s, setup := range allowedSetups {
		report.AddLatency(allowedOp, setup.name, allowedDeletes[s], allowedCalls[s], setup.base)
	}
	report.Notes = append(report.Notes, fmt.Sprintf("%s: guard p50 / %s p50 = %s (goal: at most %.2fx); %s p50 / no webhook p50 = %s",
		allowedOp, nothingDelete, p50Ratio(allowedDeletes[2], allowedDeletes[1]), evictionGoal, nothingDelete, p50Ratio(allowedDeletes[1], allowedDeletes[0])))
	for _, ns := range []string{nsNone, nsNothing, nsGuard, nsVAP, nsRefuser, nsReader, nsNothingDelete} {
		removeAll(t, ns)
	}
}

// refusalGoal bounds what the guard may add to a refusal by a webhook that
// decodes the pod and refuses, served by a bare process: its own process
// (a controller-runtime manager with informers and structured logs),
// deciding, answering and everything after the answer fit in a tenth of
// it. Any webhook that reads the pod costs what that floor does; the
// ValidatingAdmissionPolicy beside it decides in the API server and can
// write no Event, note or record (docs/performance/cost.md). An allowed
// eviction, and an allowed DELETE that reaches the guard, may cost a tenth
// more than a webhook that does nothing registered the same way. All
// are printed with the figures, not asserted: a timing is no test.
const (
	refusalGoal  = 1.10
	evictionGoal = 1.10
	// handlingGoal bounds the guard's own time per refused review (from
	// receiving it to its answer written) against the decoding refuser's.
	handlingGoal = 2.0
)

// handlingRatio is r's server time per review over base's.
func handlingRatio(r, base Reviews) string {
	if base.Handling == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(r.Handling)/float64(base.Handling))
}

// p50Ratio is the p50 of d over the p50 of base.
func p50Ratio(d, base []time.Duration) string {
	b := percentile(base, 0.5)
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(percentile(d, 0.5))/float64(b))
}
