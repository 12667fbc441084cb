//go:build e2e

package api

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// decisions sums runnerguard_guard_decisions_total over both replicas for
// the given operation and decision.
func decisions(t *testing.T, op, decision string) float64 {
	t.Helper()
	total := 0.0
	for _, s := range []*apitest.Server{server, replica} {
		n, err := s.Counter("runnerguard_guard_decisions_total", map[string]string{"operation": op, "decision": decision})
		require.NoError(t, err)
		total += n
	}
	return total
}

func eventsWith(t *testing.T, pod *corev1.Pod, reason string) []eventsv1.Event {
	t.Helper()
	return slices.DeleteFunc(podEvents(t, pod), func(e eventsv1.Event) bool { return e.Reason != reason })
}

// The same reaper and the same drain against a namespace in warn mode and
// one in enforce mode.
func TestWarnModeAllowsWhatEnforceRefusesAndSaysSo(t *testing.T) {
	warnNS := newNamespace(t, map[string]string{runnerpod.ModeLabel: "warn"})
	enforceNS := newNamespace(t, nil)
	reaperClient, warnings := warningsAs(t, reaper)
	drainer := as(t, "system:serviceaccount:kube-system:cluster-autoscaler")
	warnDeletes, warnEvictions := decisions(t, "delete", "warn"), decisions(t, "eviction", "warn")

	enforced := create(t, nil, busyRunner(enforceNS, "busy"))
	err := deletePod(reaperClient, enforced)
	assert.True(t, apierrors.IsForbidden(err), "enforce refuses the reaper; got %v", err)
	err = evict(drainer, enforced, false)
	assert.True(t, apierrors.IsTooManyRequests(err), "and the drain waits; got %v", err)
	eventually(t, func() bool { return len(eventsWith(t, enforced, "DeleteRefused")) > 0 }, "a DeleteRefused Warning")

	*warnings = nil
	deleted := create(t, nil, busyRunner(warnNS, "reaped"))
	require.NoError(t, deletePod(reaperClient, deleted), "warn allows the reaper")
	require.Len(t, *warnings, 1)
	assert.Contains(t, (*warnings)[0], "runnerguard (warn mode) allowed this; enforce mode would have refused it: runner container \"runner\" of pod "+warnNS+"/reaped")
	assert.Contains(t, (*warnings)[0], "removing the pod now loses that job")
	assert.Contains(t, (*warnings)[0], "enforce mode would wait for the job to end, unless someone granted")
	assert.NotContains(t, (*warnings)[0], "anyway", "the delete was allowed: the warning says what enforce would have done")
	evicted := create(t, nil, busyRunner(warnNS, "drained"))
	require.NoError(t, evict(drainer, evicted, false), "and the drain")
	eventually(t, func() bool { return len(eventsWith(t, deleted, "DeleteRefusedInWarnMode")) == 1 }, "a Warning Event says what enforce would have done")
	eventually(t, func() bool { return len(eventsWith(t, evicted, "EvictionRefusedInWarnMode")) == 1 }, "for the eviction too")
	assert.Equal(t, corev1.EventTypeWarning, eventsWith(t, deleted, "DeleteRefusedInWarnMode")[0].Type)
	// At least once: the API server calls a webhook again when the first
	// call's connection was reset, and each call is a decision counted.
	assert.GreaterOrEqual(t, decisions(t, "delete", "warn"), warnDeletes+1)
	assert.GreaterOrEqual(t, decisions(t, "eviction", "warn"), warnEvictions+1)

	// The runner killed under warn: its record says enforce would have
	// refused the delete.
	st := podtest.Runner(warnNS, "reaped").Terminated("runner", 143, "Error").Obj().Status
	st.ContainerStatuses[0].State.Terminated.StartedAt = metav1.NewTime(time.Now().Add(-3 * time.Minute))
	st.ContainerStatuses[0].State.Terminated.FinishedAt = metav1.NewTime(time.Now())
	setStatus(t, deleted, st)
	r := oneDeath(t, deleted)
	assert.Equal(t, "busy", r.DeleteRule)
	assert.Contains(t, runWhy(t, "reaped", "-n", warnNS), "allowed only because the guard was in warn mode; enforce would have refused it")
	// What enforce would have refused is kept on the record as a refusal
	// is, for the records' retention (far past a warn week), and listed.
	require.NotNil(t, r.Refusals)
	require.Len(t, r.Refusals.Entries, 1)
	w := r.Refusals.Entries[0]
	assert.True(t, w.Warned, "let through by warn mode")
	assert.Equal(t, reaper, w.By)
	assert.Equal(t, "delete", w.Verb)
	assert.Equal(t, int32(1), w.Count)
	assert.GreaterOrEqual(t, suiteCfg.Records.MaxAge.Duration, 7*24*time.Hour, "a warn week's evidence outlives the week")
	out, errOut, code := runCLI(t, nil, "refusals", "--warned", "--kubeconfig", adminKubeconfig, "-n", warnNS)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^`+warnNS+`\s+reaped\s+died\s+delete\s+`+reaper+`\s+warned\s+1\s`, out)
	assert.Contains(t, runWhy(t, "reaped", "-n", warnNS), "(warn mode let it through; enforce would refuse it) delete by "+reaper)

	// An exec warn mode lets through leaves the live pod that evidence.
	olga := may(t, warnNS, person("olga@example.com"), "edit")
	execd := create(t, nil, busyRunner(warnNS, "execd"))
	err = connect(t, olga, execd, "exec", "runner")
	assert.False(t, apierrors.IsForbidden(err), "warn lets the exec through (no kubelet here to run it): %v", err)
	eventually(t, func() bool {
		l := storedRefusals(t, execd)
		return l != nil && len(l.Entries) == 1 && l.Entries[0].Warned && l.Entries[0].Verb == "exec" && l.Entries[0].By == olga.user
	}, "the exec enforce would refuse is kept on the pod")

	// Switching the namespace to enforce takes effect without a restart.
	ns := &corev1.Namespace{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKey{Name: warnNS}, ns))
	ns.Labels[runnerpod.ModeLabel] = "enforce"
	require.NoError(t, admin.Update(context.Background(), ns))
	later := create(t, nil, busyRunner(warnNS, "later"))
	eventually(t, func() bool { return apierrors.IsForbidden(deletePod(as(t, reaper), later)) }, "the namespace now enforces")
}

// A reaper retrying every 100 ms and a drain retrying its eviction write a
// bounded number of Event objects: repeats become a series on one Event
// per replica, as the events API aggregates them. The Events are counted
// as they are created, from a watch: the suite's API server keeps an Event
// only apitest.EventTTL, which a slow machine's retries outlast.
func TestRetriesWriteABoundedNumberOfEvents(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := create(t, nil, busyRunner(ns, "hammered"))
	reaperClient, drainer := as(t, reaper), as(t, "system:serviceaccount:kube-system:cluster-autoscaler")
	const retries = 60
	created := eventsCreated(t, pod)
	deletes, evictions := decisions(t, "delete", "deny"), decisions(t, "eviction", "deny")
	for range retries {
		require.True(t, apierrors.IsForbidden(deletePod(reaperClient, pod)))
		require.True(t, apierrors.IsTooManyRequests(evict(drainer, pod, false)))
		time.Sleep(100 * time.Millisecond)
	}
	eventually(t, func() bool {
		evs := created()
		return len(evs["DeleteRefused"]) > 0 && len(evs["EvictionRefused"]) > 0
	}, "the refusals are on record")
	// Each refusal is counted as its Event is handed to the events
	// recorder: once all are, every Event object they could write is due.
	eventually(t, func() bool {
		return decisions(t, "delete", "deny")-deletes >= retries && decisions(t, "eviction", "deny")-evictions >= retries
	}, "every refusal's work after its answer is done")
	evs := created()
	for _, reason := range []string{"DeleteRefused", "EvictionRefused"} {
		assert.LessOrEqual(t, len(evs[reason]), 2, "%s: at most one Event object per replica for %d refusals", reason, retries)
		for _, e := range evs[reason] {
			assert.True(t, strings.Contains(e.Note, "refused"), e.Note)
		}
	}
}

// eventsCreated watches the Events regarding pod from now on and returns
// what it has seen created so far, by reason, each Event object once.
func eventsCreated(t *testing.T, pod *corev1.Pod) func() map[string][]eventsv1.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := cs.EventsV1().Events(pod.Namespace).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var mu sync.Mutex
	seen, byReason := map[types.UID]bool{}, map[string][]eventsv1.Event{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			ev, ok := e.Object.(*eventsv1.Event)
			if !ok || ev.Regarding.Kind != "Pod" || ev.Regarding.Name != pod.Name {
				continue
			}
			mu.Lock()
			if !seen[ev.UID] {
				seen[ev.UID] = true
				byReason[ev.Reason] = append(byReason[ev.Reason], *ev)
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return func() map[string][]eventsv1.Event {
		mu.Lock()
		defer mu.Unlock()
		out := map[string][]eventsv1.Event{}
		for reason, evs := range byReason {
			out[reason] = slices.Clone(evs)
		}
		return out
	}
}
