//go:build fleets

package fleets

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// What the Tekton, Buildkite and Woodpecker cases check alike.

// onlyRecord waits for the record of pod, then for one recorder's round
// more (a second record would come within it), checks that it is the
// only one and returns it, logged as what's (the job, as its fleet names
// it).
func onlyRecord(t *testing.T, pod podRef, what string) death.Record {
	t.Helper()
	deathRecords(t, pod)
	time.Sleep(3 * time.Second)
	recs := deathRecords(t, pod)
	require.Len(t, recs, 1, "one record of %s", what)
	r := recs[0]
	t.Logf("record of %s: class %s (%s), container %s, exit %v reason %q, started %v, job started %v, deleted %v by %s (%s), finished %v",
		what, r.Class, r.ClassBasis, r.Container, ptrStr(r.ExitCode), r.Reason, r.StartedAt, r.JobStartedAt, r.DeletedAt, r.DeletedBy, r.DeleteRule, r.FinishedAt)
	return r
}

// whyOf is `kubectl runnerguard why` of the pod, logged and checked for
// where it ends the job (assertWhyTimes).
func whyOf(t *testing.T, pod podRef, r death.Record) string {
	t.Helper()
	why := runnerguardWhy(t, pod.namespace, pod.name)
	t.Logf("kubectl runnerguard why %s:\n%s", pod.name, why)
	assertWhyTimes(t, why, r)
	return why
}

// assertCreated checks what the injector recorded of the pod: creator
// made it, and the preset is preset's. It returns the pod as it is now.
func assertCreated(t *testing.T, pod podRef, creator, preset string) *corev1.Pod {
	t.Helper()
	p, err := cs.CoreV1().Pods(pod.namespace).Get(context.Background(), pod.name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, creator, p.Annotations[runnerpod.CreatedBy], "the pod's creator, as the injector recorded it")
	assert.Equal(t, preset, p.Annotations[runnerpod.PresetAnnotation])
	return p
}

// deleteAndEvictRefused: a reaper (user, a ServiceAccount with edit)
// deletes, then evicts, the pod of a running job (what names it): the
// delete is refused with 403 and a DeleteRefused Event naming the reaper,
// the eviction with 429, and the pod is the same one, not being deleted.
// It returns the delete's answer, for what it says.
func deleteAndEvictRefused(t *testing.T, reaper *kubernetes.Clientset, user string, pod podRef, what string) error {
	t.Helper()
	ctx := context.Background()
	delErr := reaper.CoreV1().Pods(pod.namespace).Delete(ctx, pod.name, metav1.DeleteOptions{})
	require.Error(t, delErr, "the reaper's delete of %s", what)
	assert.True(t, apierrors.IsForbidden(delErr), "refused with 403: %v", delErr)
	waitEvent(t, pod.namespace, pod.name, "DeleteRefused", user)
	err := reaper.PolicyV1().Evictions(pod.namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.namespace, Name: pod.name}})
	require.Error(t, err, "the reaper's eviction of %s", what)
	assert.True(t, apierrors.IsTooManyRequests(err), "refused with 429: %v", err)
	p, err := cs.CoreV1().Pods(pod.namespace).Get(ctx, pod.name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, pod.uid, p.UID)
	assert.Nil(t, p.DeletionTimestamp, "the pod is not being deleted")
	return delErr
}

// assertDeleteAndEvictionRefused: the record keeps the reaper's refused
// delete and eviction (deleteAndEvictRefused), and no one else's. Each
// was tried once, but the API server calls a webhook again when its first
// call's connection was reset, and on a loaded machine the second call
// can come later than refusal.Repeat: a count of two is the same try.
func assertDeleteAndEvictionRefused(t *testing.T, r death.Record, user string) {
	t.Helper()
	if assert.NotNil(t, r.Refusals, "the reaper's refusals on the record") {
		verbs := map[string]int32{}
		for _, e := range r.Refusals.Entries {
			assert.Equal(t, user, e.By)
			verbs[e.Verb] += e.Count
		}
		assert.ElementsMatch(t, []string{"delete", "eviction"}, slices.Collect(maps.Keys(verbs)), "%+v", r.Refusals.Entries)
		for verb, n := range verbs {
			assert.Contains(t, []int32{1, 2}, n, "the %s tried once, its review called at most twice: %+v", verb, r.Refusals.Entries)
		}
	}
}

// assertEndedByOwner: the job's owner (its controller or agent) deleted
// the running pod (a cancel or a timeout), under rule job-owner, and none
// of its own work was refused.
func assertEndedByOwner(t *testing.T, r death.Record, owner string) {
	t.Helper()
	assert.Equal(t, owner, r.DeletedBy)
	assert.Equal(t, string(runnerpod.RuleJobOwner), r.DeleteRule)
	if assert.NotNil(t, r.DeletedAt) {
		assert.False(t, r.FinishedAt.Before(r.DeletedAt), "the job's container ended %v before the delete %v", r.FinishedAt, r.DeletedAt)
	}
	assert.Nil(t, r.Refusals, "the owner's own work refused")
}

// fleetCase is one case of a fleet's suite, run on its fleet f.
type fleetCase[F any] struct {
	name string
	run  func(t *testing.T, f F)
}

// runCases runs cases side by side under group on f, then logs
// `kubectl runnerguard deaths` of ns and, once every case passed and want
// is set, checks its first line: the count is of every case's record.
func runCases[F any](t *testing.T, f F, ns, group string, cases []fleetCase[F], want string) {
	t.Helper()
	t.Run(group, func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, f)
			})
		}
	})
	if t.Failed() {
		return
	}
	out := runnerguardDeaths(t, ns)
	t.Logf("kubectl runnerguard deaths -n %s:\n%s", ns, out)
	if want != "" {
		assert.Equal(t, want, strings.SplitN(out, "\n", 2)[0], out)
	}
}
