package recorder

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const (
	karp = runnerpod.KarpenterDoNotDisrupt
	ca   = runnerpod.ClusterAutoscalerSafeEvict
	both = karp + "," + ca
)

func TestMarkPlan(t *testing.T) {
	on := config.Marks{Karpenter: true, ClusterAutoscaler: true}
	for _, tc := range []struct {
		name  string
		ann   map[string]string
		busy  bool
		marks config.Marks
		want  map[string]*string
	}{
		{name: "a busy runner gets both marks, listed as runnerguard's", busy: true, marks: on,
			want: map[string]*string{karp: ptr.To("true"), ca: ptr.To("false"), runnerpod.Marked: ptr.To(both)}},
		{name: "a busy runner already marked: nothing to do", busy: true, marks: on,
			ann: map[string]string{karp: "true", ca: "false", runnerpod.Marked: both}},
		{name: "an idle runner loses runnerguard's marks and their list", marks: on,
			ann:  map[string]string{karp: "true", ca: "false", runnerpod.Marked: both},
			want: map[string]*string{karp: nil, ca: nil, runnerpod.Marked: nil}},
		{name: "an idle runner without marks: nothing to do", marks: on},
		{name: "the author's marks are never changed, busy or not", marks: on,
			ann: map[string]string{karp: "false", ca: "true"}},
		{name: "the author's mark stays and runnerguard sets only the other", busy: true, marks: on,
			ann:  map[string]string{karp: "false"},
			want: map[string]*string{ca: ptr.To("false"), runnerpod.Marked: ptr.To(ca)}},
		{name: "a mark of runnerguard's changed by someone is set back while busy", busy: true, marks: on,
			ann:  map[string]string{karp: "false", ca: "false", runnerpod.Marked: both},
			want: map[string]*string{karp: ptr.To("true")}},
		{name: "a mark of runnerguard's removed by someone is set again while busy", busy: true, marks: on,
			ann:  map[string]string{ca: "false", runnerpod.Marked: both},
			want: map[string]*string{karp: ptr.To("true")}},
		{name: "a listed mark gone from an idle pod leaves the list", marks: on,
			ann:  map[string]string{ca: "false", runnerpod.Marked: both},
			want: map[string]*string{ca: nil, runnerpod.Marked: nil}},
		{name: "a mark turned off is not set", busy: true, marks: config.Marks{ClusterAutoscaler: true},
			want: map[string]*string{ca: ptr.To("false"), runnerpod.Marked: ptr.To(ca)}},
		{name: "a mark of runnerguard's turned off is removed", busy: true, marks: config.Marks{ClusterAutoscaler: true},
			ann:  map[string]string{karp: "true", ca: "false", runnerpod.Marked: both},
			want: map[string]*string{karp: nil, runnerpod.Marked: ptr.To(ca)}},
		{name: "an author's mark with both turned off stays", marks: config.Marks{},
			ann: map[string]string{karp: "true"}},
		{name: "a list naming what is not a mark is rewritten", busy: true, marks: on,
			ann:  map[string]string{karp: "true", ca: "false", runnerpod.Marked: both + ",example.com/x"},
			want: map[string]*string{runnerpod.Marked: ptr.To(both)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podtest.Runner("ns", "p").Obj()
			pod.Annotations = tc.ann
			assert.Equal(t, tc.want, MarkPlan(pod, tc.busy, tc.marks))
		})
	}
}

// The cache keeps what the marker reads: the marks, their list, the
// override, and the pod's own deadline.
func TestTheCacheKeepsWhatTheMarkerReads(t *testing.T) {
	started := time.Now().Add(-time.Minute).Truncate(time.Second)
	pod := podtest.GitLab("ns", "p").Running("build").ActiveDeadline(600, started).
		Annotate(karp, "true").Annotate(runnerpod.Marked, karp).Annotate(runnerpod.AllowDelete, "drain").Annotate("other", "x").Obj()
	c, err := compact(pod)
	assert.NoError(t, err)
	got := c.(*cachedPod).pod()
	assert.Equal(t, map[string]string{karp: "true", runnerpod.Marked: karp, runnerpod.AllowDelete: "drain"}, got.Annotations)
	end, ok := runnerpod.PodDeadline(got)
	assert.True(t, ok)
	assert.Equal(t, started.Add(600*time.Second), end)
	copied := c.(*cachedPod).DeepCopyObject().(*cachedPod).pod()
	assert.Equal(t, got.Spec.ActiveDeadlineSeconds, copied.Spec.ActiveDeadlineSeconds)
	assert.Equal(t, got.Status.StartTime, copied.Status.StartTime)
}

// The leader keeps of an EphemeralRunner what judges its job, and judges
// it as the guard does.
func TestTheEphemeralRunnerCacheKeepsWhatJudgesTheJob(t *testing.T) {
	er := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner",
		"metadata": map[string]any{"namespace": "ns", "name": "r", "uid": "er-1", "finalizers": []any{runnerpod.ARCRegistrationFinalizer}},
		"spec":     map[string]any{"podTemplateSpec": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "runner"}}}}},
		"status":   map[string]any{"jobRequestId": int64(42), "phase": "Running"},
	}}
	out, err := compactEphemeralRunner(er)
	require.NoError(t, err)
	c := out.(*unstructured.Unstructured)
	assert.NotContains(t, c.Object, "spec")
	assert.Equal(t, map[string]any{"jobRequestId": int64(42)}, c.Object["status"])
	assert.Equal(t, []string{runnerpod.ARCRegistrationFinalizer}, c.GetFinalizers())
	job, _ := runnerpod.EphemeralRunnerJob(c, "er-1")
	assert.Equal(t, runnerpod.JobAssigned, job)

	unstructured.RemoveNestedField(er.Object, "status", "jobRequestId")
	out, err = compactEphemeralRunner(er)
	require.NoError(t, err)
	job, _ = runnerpod.EphemeralRunnerJob(out.(*unstructured.Unstructured), "er-1")
	assert.Equal(t, runnerpod.JobNone, job)
}
