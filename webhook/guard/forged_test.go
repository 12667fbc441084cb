package guard

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

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
			allowed := decisions.WithLabelValues("delete", "allow", string(runnerpod.RuleOverride), "user")
			denied := decisions.WithLabelValues("delete", "deny", string(runnerpod.RuleBusy), "user")
			before := testutil.ToFloat64(allowed) + testutil.ToFloat64(denied)
			assert.True(t, serve(t, h, deleteReq(t, pod, tc.requester, false, nil)).Allowed, "the answer is the decision's")
			assert.False(t, serve(t, h, deleteReq(t, busy, tc.requester, false, nil)).Allowed)
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
	require.True(t, serve(t, h, deleteReq(t, pod, "mallory", false, nil)).Allowed)
	assert.Nil(t, deletionNote(t, h, pod))
	assert.Empty(t, drain(rec))
}
