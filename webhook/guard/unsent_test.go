package guard

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestAReviewTheAPIServerCannotHaveSentWritesNothing(t *testing.T) {
	selected := map[string]string{runnerpod.EnabledNamespaceLabel: "true"}
	cases := []struct {
		name      string
		ns        *corev1.Namespace
		requester string
	}{
		{name: "a pod in kube-system", ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: selected}}, requester: "mallory"},
		{name: "a pod in a namespace the webhooks do not select", ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, requester: "mallory"},
		{name: "a review naming no requester", ns: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci", Labels: selected}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := podtest.Runner(tc.ns.Name, "r").Running("runner").Annotate(runnerpod.AllowDelete, "forged").Obj()
			busy := podtest.Runner(tc.ns.Name, "busy").Running("runner").Obj()
			h, rec := newTestHandler(pod, busy, tc.ns)
			h.Namespaces = h.Reader
			h.Selected = labels.SelectorFromSet(selected)
			allowed := decisions.WithLabelValues("delete", "allow", string(RuleOverride), "user")
			denied := decisions.WithLabelValues("delete", "deny", string(RuleBusy), "user")
			before := testutil.ToFloat64(allowed) + testutil.ToFloat64(denied)
			assert.True(t, h.Handle(context.Background(), deleteReq(t, pod, tc.requester, false, nil)).Allowed, "the answer is the decision's")
			assert.False(t, h.Handle(context.Background(), deleteReq(t, busy, tc.requester, false, nil)).Allowed)
			assert.Nil(t, deletionNote(t, h, pod), "no note")
			assert.Empty(t, drain(rec), "no Event")
			got := &corev1.Pod{}
			require.NoError(t, h.Reader.Get(context.Background(), client.ObjectKeyFromObject(pod), got))
			assert.NotContains(t, got.Labels, runnerpod.RunnerLabel, "no label")
			assert.Equal(t, before, testutil.ToFloat64(allowed)+testutil.ToFloat64(denied), "no metric")
		})
	}
}

func TestAReviewOfAPodAlreadyTerminatingWritesNothing(t *testing.T) {
	pod := podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj()
	h, rec := newTestHandler(pod)
	terminating := pod.DeepCopy()
	terminating.Finalizers = []string{"example.com/hold"}
	terminating.DeletionTimestamp = &metav1.Time{Time: podtest.Start}
	h.Pods = fake.NewClientBuilder().WithObjects(terminating).Build()
	// The forged review brings the pod as it was before its deletion.
	require.True(t, h.Handle(context.Background(), deleteReq(t, pod, "mallory", false, nil)).Allowed)
	assert.Nil(t, deletionNote(t, h, pod))
	assert.Empty(t, drain(rec))
}

func TestANoteWaitsForTheDeletionItTellsOf(t *testing.T) {
	c, _ := notesClient(t, 0)
	var deleted atomic.Bool
	var looked atomic.Int32
	n := NewNotes(c, 4)
	n.Deleted = func(context.Context, *v1alpha1.RunnerDeletion) (bool, error) {
		looked.Add(1)
		return deleted.Load(), nil
	}
	n.Write(context.Background(), testNote("u1"))
	require.Eventually(t, func() bool { return looked.Load() >= 2 }, 10*time.Second, 10*time.Millisecond)
	assert.False(t, noted(t, c, "u1"), "not before the deletion")
	deleted.Store(true)
	n.pending.Wait()
	assert.True(t, noted(t, c, "u1"), "once the pod is deleted")

	// A review of a pod nobody deletes (refused, or not the API server's)
	// leaves no note, and nothing failed.
	deleted.Store(false)
	failed := testutil.ToFloat64(notesFailed)
	n.Write(context.Background(), testNote("u2"))
	n.pending.Wait()
	assert.False(t, noted(t, c, "u2"))
	assert.Equal(t, failed, testutil.ToFloat64(notesFailed))

	// With every slot busy, a note cannot wait for the deletion: dropped.
	n = NewNotes(c, 0)
	n.Deleted = func(context.Context, *v1alpha1.RunnerDeletion) (bool, error) { return true, nil }
	n.Write(context.Background(), testNote("u3"))
	assert.False(t, noted(t, c, "u3"))
	assert.Equal(t, failed+1, testutil.ToFloat64(notesFailed))
}
