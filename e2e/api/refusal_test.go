//go:build e2e

package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/report"
)

// refusalsKept is the policy's word on the refusals annotation.
const refusalsKept = "only runnerguard may write runnerguard.io/refusals"

// storedRefusals reads the refusals kept on pod, nil while none are.
func storedRefusals(t *testing.T, pod *corev1.Pod) *v1alpha1.Refusals {
	t.Helper()
	got := &corev1.Pod{}
	require.NoError(t, admin.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
	l, err := refusal.FromPod(got.Annotations)
	require.NoError(t, err)
	return l
}

// counts is each requester's refusals by verb: "by verb" -> count.
func counts(l *v1alpha1.Refusals) map[string]int32 {
	out := map[string]int32{}
	if l != nil {
		for _, e := range l.Entries {
			out[e.By+" "+e.Verb] = e.Count
		}
	}
	return out
}

// A reaper with edit refused twice and an operator refused an eviction
// and an exec, on one busy runner: the pod keeps both requesters with their
// counts, the CLI lists them, the reaper can neither erase nor forge them,
// dry runs add nothing, and the runner's record carries them once it dies.
func TestRefusalsAreKeptOnTheRunnerAndItsRecord(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount("system:serviceaccount:"+ns+":orphan-reaper"), "edit")
	olga := may(t, ns, person("olga@example.com"), "edit")
	pod := create(t, nil, busyRunner(ns, "busy"))
	rc := reaperSA.client(t)

	// Dry runs first: refused alike, kept nowhere.
	require.Equal(t, int32(http.StatusForbidden), statusCode(deletePod(rc, pod, client.DryRunAll)))
	require.Equal(t, int32(http.StatusTooManyRequests), statusCode(evict(olga.client(t), pod, true)))
	for range 2 {
		require.Equal(t, int32(http.StatusForbidden), statusCode(deletePod(rc, pod)))
		// Two attempts: refusals of one requester's verb decided on two
		// copies of the pod within refusal.Repeat are taken for the API
		// server's second review of one, and the first refusal's write
		// makes a new copy.
		time.Sleep(2 * refusal.Repeat)
	}
	require.Equal(t, int32(http.StatusTooManyRequests), statusCode(evict(olga.client(t), pod, false)))
	require.Error(t, connect(t, olga, pod, "exec", "runner"))

	want := map[string]int32{reaperSA.user + " delete": 2, olga.user + " eviction": 1, olga.user + " exec": 1}
	var last map[string]int32
	assert.Eventually(t, func() bool { last = counts(storedRefusals(t, pod)); return assert.ObjectsAreEqual(want, last) },
		patience, 100*time.Millisecond, "both requesters' refusals kept on the pod")
	require.Equal(t, want, last)
	// A later refusal, kept: what the dry runs could still have left would
	// have come before it.
	marker := may(t, ns, person("mark@example.com"), "edit")
	require.Error(t, connect(t, marker, pod, "exec", "runner"))
	want[marker.user+" exec"] = 1
	assert.Eventually(t, func() bool { last = counts(storedRefusals(t, pod)); return assert.ObjectsAreEqual(want, last) },
		patience, 100*time.Millisecond, "the marker's refusal kept on the pod")
	kept := storedRefusals(t, pod)
	assert.Equal(t, want, counts(kept), "and no more: a dry run adds nothing")
	for _, e := range kept.Entries {
		assert.Equal(t, string("busy"), e.Rule, "%s %s", e.By, e.Verb)
		assert.False(t, e.Last.Before(&e.First))
	}

	// The reaper cannot erase its refusals, nor write others'.
	requireRefusedByPolicy(t, patchMeta(rc, pod, annotations(refusal.Annotation, nil)), refusalsKept)
	forged, err := refusal.Format(v1alpha1.Refusals{})
	require.NoError(t, err)
	requireRefusedByPolicy(t, patchMeta(rc, pod, annotations(refusal.Annotation, forged)), refusalsKept)
	requireRefusedByPolicy(t, patchMeta(olga.client(t), pod, annotations(refusal.Annotation, forged)), refusalsKept)

	// The CLI lists them, as the admin and as JSON.
	out, errOut, code := runCLI(t, nil, "refusals", "--kubeconfig", adminKubeconfig, "-n", ns)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^`+ns+`\s+busy\s+live\s+delete\s+`+reaperSA.user+`\s+refused\s+2\s+\S+\s+\S+\s+busy$`, out)
	assert.Regexp(t, `(?m)^`+ns+`\s+busy\s+live\s+eviction\s+olga@example.com\s+refused\s+1\s`, out)
	assert.Regexp(t, `(?m)^`+ns+`\s+busy\s+live\s+exec\s+olga@example.com\s+refused\s+1\s`, out)
	out, errOut, code = runCLI(t, nil, "refusals", "busy", "--kubeconfig", adminKubeconfig, "-n", ns, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var listed []report.PodRefusals
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	require.Len(t, listed, 1)
	assert.Equal(t, want, counts(listed[0].Refusals))
	out, _, _ = runCLI(t, nil, "why", "busy", "--kubeconfig", adminKubeconfig, "-n", ns)
	assert.Contains(t, out, "refused so far:\n    delete by "+reaperSA.user+": 2 times")

	// The runner dies: its record carries them.
	kubeletEnds(t, pod, podtest.Runner(ns, "busy").Terminated("runner", 1, "Error"))
	r := oneDeath(t, pod)
	require.NotNil(t, r.Refusals)
	assert.Equal(t, want, counts(r.Refusals))
	out, errOut, code = runCLI(t, nil, "why", "busy", "--kubeconfig", adminKubeconfig, "-n", ns)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "refused while it ran (the guard's record):\n    delete by "+reaperSA.user+": 2 times")
	assert.True(t, strings.Contains(out, "exec by olga@example.com: 1 time"), out)
}

// A reaper with edit that keeps patching the busy pod it was refused on
// (about 50 patches a second, as the security review played it) cannot
// keep its refusals off the pod: each is kept, however fast the pod
// changes.
func TestChurnDoesNotEraseAReapersRefusals(t *testing.T) {
	ns := newNamespace(t, nil)
	reaperSA := may(t, ns, serviceAccount("system:serviceaccount:"+ns+":orphan-reaper"), "edit")
	pod := create(t, nil, busyRunner(ns, "busy"))
	rc := reaperSA.client(t)

	ctx, stop := context.WithCancel(context.Background())
	var churned atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				if patchMeta(rc, pod, map[string]any{"labels": map[string]any{"churn": fmt.Sprint(churned.Load())}}) == nil {
					churned.Add(1)
				}
			}
		}
	}()
	defer func() { stop(); <-done }()
	eventually(t, func() bool { return churned.Load() >= 5 }, "the reaper is patching the pod")
	// Attempts further apart than refusal.Repeat, as a controller's
	// retries are: closer ones on two copies of the pod count as the API
	// server's second review of one attempt.
	for range 8 {
		require.Equal(t, int32(http.StatusForbidden), statusCode(deletePod(rc, pod)))
		time.Sleep(refusal.Repeat + 50*time.Millisecond)
	}
	want := map[string]int32{reaperSA.user + " delete": 8}
	var last map[string]int32
	assert.Eventually(t, func() bool { last = counts(storedRefusals(t, pod)); return assert.ObjectsAreEqual(want, last) },
		patience, 100*time.Millisecond, "every refusal kept while the pod churns")
	require.Equal(t, want, last)
}
