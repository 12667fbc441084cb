package recorder

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const (
	karp = runnerpod.KarpenterDoNotDisrupt
	ca   = runnerpod.ClusterAutoscalerSafeEvict
	vols = runnerpod.ClusterAutoscalerLocalVolumes
	both = karp + "," + ca
)

var (
	busy = Judgement{Judged: true, Protection: presets.Protection{Busy: true}}
	free = Judgement{Judged: true}
)

func TestMarkPlan(t *testing.T) {
	on := config.Marks{Karpenter: true, ClusterAutoscaler: true}
	for _, tc := range []struct {
		name  string
		ann   map[string]string
		j     Judgement
		marks config.Marks
		want  map[string]*string
	}{
		{name: "a busy runner gets both marks, listed as runnerguard's", j: busy, marks: on,
			want: map[string]*string{karp: ptr.To("true"), ca: ptr.To("false"), runnerpod.Marked: ptr.To(both)}},
		{name: "a busy runner already marked: nothing to do", j: busy, marks: on,
			ann: map[string]string{karp: "true", ca: "false", runnerpod.Marked: both}},
		{name: "an idle runner loses do-not-disrupt and is safe to evict", j: free, marks: on,
			ann:  map[string]string{karp: "true", ca: "false", runnerpod.Marked: both},
			want: map[string]*string{karp: nil, ca: ptr.To("true"), runnerpod.Marked: ptr.To(ca)}},
		{name: "an idle runner without marks is marked safe to evict", j: free, marks: on,
			want: map[string]*string{ca: ptr.To("true"), runnerpod.Marked: ptr.To(ca)}},
		{name: "an idle runner already safe to evict: nothing to do", j: free, marks: on,
			ann: map[string]string{ca: "true", runnerpod.Marked: ca}},
		{name: "a pod runnerguard does not judge loses runnerguard's marks and their list", marks: on,
			ann:  map[string]string{karp: "true", ca: "false", runnerpod.Marked: both},
			want: map[string]*string{karp: nil, ca: nil, runnerpod.Marked: nil}},
		{name: "a pod runnerguard does not judge and has no marks: nothing to do", marks: on},
		{name: "the author's marks are never changed, busy or not", j: free, marks: on,
			ann: map[string]string{karp: "false", ca: "false"}},
		{name: "the author's mark stays and runnerguard sets only the other", j: busy, marks: on,
			ann:  map[string]string{karp: "false"},
			want: map[string]*string{ca: ptr.To("false"), runnerpod.Marked: ptr.To(ca)}},
		{name: "a mark of runnerguard's changed by someone is set back while busy", j: busy, marks: on,
			ann:  map[string]string{karp: "false", ca: "true", runnerpod.Marked: both},
			want: map[string]*string{karp: ptr.To("true"), ca: ptr.To("false")}},
		{name: "a mark of runnerguard's removed by someone is set again while busy", j: busy, marks: on,
			ann:  map[string]string{ca: "false", runnerpod.Marked: both},
			want: map[string]*string{karp: ptr.To("true")}},
		{name: "a mark turned off is not set", j: busy, marks: config.Marks{ClusterAutoscaler: true},
			want: map[string]*string{ca: ptr.To("false"), runnerpod.Marked: ptr.To(ca)}},
		{name: "a mark of runnerguard's turned off is removed", j: busy, marks: config.Marks{ClusterAutoscaler: true},
			ann:  map[string]string{karp: "true", ca: "false", runnerpod.Marked: both},
			want: map[string]*string{karp: nil, runnerpod.Marked: ptr.To(ca)}},
		{name: "an author's mark with both turned off stays", j: busy, marks: config.Marks{},
			ann: map[string]string{karp: "true"}},
		{name: "a list naming what is not a mark is rewritten", j: busy, marks: on,
			ann:  map[string]string{karp: "true", ca: "false", runnerpod.Marked: both + ",example.com/x"},
			want: map[string]*string{runnerpod.Marked: ptr.To(both)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podtest.Runner("ns", "p").Obj()
			pod.Annotations = tc.ann
			assert.Equal(t, tc.want, MarkPlan(pod, tc.j, tc.marks))
		})
	}
}

// An instrumented pod names the injector's volumes to cluster-autoscaler,
// busy or not, unless its author named its own.
func TestMarkPlanNamesTheInjectedVolumes(t *testing.T) {
	on := config.Marks{ClusterAutoscaler: true}
	injected := runnerpod.CgroupVolume + "," + runnerpod.VitalsVolume
	instrumented := func() *podtest.Wrapper {
		return podtest.Runner("ns", "p").InitContainer(runnerpod.VitalsContainer)
	}
	for _, tc := range []struct {
		name string
		pod  *podtest.Wrapper
		j    Judgement
		want map[string]*string
	}{
		{name: "an instrumented busy runner", pod: instrumented(), j: busy,
			want: map[string]*string{ca: ptr.To("false"), vols: ptr.To(injected), runnerpod.Marked: ptr.To(ca + "," + vols)}},
		{name: "an instrumented idle runner", pod: instrumented(), j: free,
			want: map[string]*string{ca: ptr.To("true"), vols: ptr.To(injected), runnerpod.Marked: ptr.To(ca + "," + vols)}},
		{name: "a runner without the sidecar has no injected volumes to name", pod: podtest.Runner("ns", "p"), j: free,
			want: map[string]*string{ca: ptr.To("true"), runnerpod.Marked: ptr.To(ca)}},
		{name: "the author's list of local volumes stays", pod: instrumented().Annotate(vols, "scratch"), j: free,
			want: map[string]*string{ca: ptr.To("true"), runnerpod.Marked: ptr.To(ca)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, MarkPlan(tc.pod.Obj(), tc.j, on))
		})
	}
}

// With the duration form, do-not-disrupt carries the protection's end as
// Karpenter counts it: from the pod's start.
func TestKarpenterValue(t *testing.T) {
	start := podtest.Start
	pod := podtest.Runner("ns", "p").Obj()
	pod.Status.StartTime = &metav1.Time{Time: start}
	unstarted := podtest.Runner("ns", "p").Obj()
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		until    time.Time
		duration bool
		want     string
	}{
		{name: "without the duration form the mark is true", pod: pod, until: start.Add(time.Hour), want: "true"},
		{name: "the duration form counts from the pod's start", pod: pod, until: start.Add(168 * time.Hour), duration: true, want: "604800s"},
		{name: "a part of a second is rounded up", pod: pod, until: start.Add(90*time.Second + time.Millisecond), duration: true, want: "91s"},
		{name: "no known end is true", pod: pod, duration: true, want: "true"},
		{name: "no known start is true", pod: unstarted, until: start.Add(time.Hour), duration: true, want: "true"},
		{name: "an end before the start is true", pod: pod, until: start.Add(-time.Hour), duration: true, want: "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, karpenterValue(tc.pod, tc.until, tc.duration))
		})
	}
}

// The marker judges as the guard: a busy runner is protected, and has a
// budget in an enforce namespace only.
func TestJudge(t *testing.T) {
	now := podtest.Start.Add(time.Hour)
	generic := runnerpod.Runner{Preset: runnerpod.Preset{Name: generic.Name, Enabled: true, RunnerContainers: []string{"runner"}, MaxProtected: metav1.Duration{Duration: 168 * time.Hour}}, Containers: []string{"runner"}}
	running := podtest.Runner("ns", "p").Running("runner").Obj()
	overridden := podtest.Runner("ns", "p").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj()
	notStarted := podtest.Runner("ns", "p").Obj()
	until := podtest.Start.Add(168 * time.Hour)
	zombie := runnerpod.Zombie{Kind: "spent-config", Since: podtest.Start}
	named := podtest.Runner("ns", "p").Running("runner").Annotate(runnerpod.ZombieAnnotation, zombie.Value()).Obj()
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		f    Facts
		want Judgement
	}{
		{name: "a busy runner of an enforce namespace is protected and has a budget", pod: running,
			f:    Facts{Selected: true, Enforce: true, Now: now},
			want: Judgement{Judged: true, Protection: presets.Protection{Busy: true, Until: until}, Budget: true}},
		{name: "a busy runner of a warn namespace is protected without a budget", pod: running,
			f:    Facts{Selected: true, Now: now},
			want: Judgement{Judged: true, Protection: presets.Protection{Busy: true, Until: until}}},
		{name: "an overridden runner is free and has no budget", pod: overridden,
			f: Facts{Selected: true, Enforce: true, Now: now}, want: Judgement{Judged: true}},
		{name: "a runner not started is free", pod: notStarted,
			f: Facts{Selected: true, Enforce: true, Now: now}, want: Judgement{Judged: true}},
		{name: "a runner past its cap is free", pod: running,
			f: Facts{Selected: true, Enforce: true, Now: until.Add(time.Minute)}, want: Judgement{Judged: true}},
		{name: "a busy runner where the operator switched the guard off is free and has no budget", pod: running,
			f: Facts{Selected: true, Released: true, Now: now}, want: Judgement{Judged: true}},
		{name: "a pod of a namespace the webhooks do not act in is not judged", pod: running,
			f: Facts{Enforce: true, Now: now}, want: Judgement{}},
		{name: "a busy runner on a node whose drain deadline passed is free and has no budget", pod: running,
			f: Facts{Selected: true, Enforce: true, Node: drainingNode(now.Add(-time.Minute), "alice"), Now: now}, want: Judgement{Judged: true}},
		{name: "a busy runner on a node whose drain deadline is to come is protected until then", pod: running,
			f:    Facts{Selected: true, Enforce: true, Node: drainingNode(now.Add(time.Hour), "alice"), Now: now},
			want: Judgement{Judged: true, Protection: presets.Protection{Busy: true, Until: now.Add(time.Hour)}, Budget: true}},
		{name: "a zombie the fleet's evidence shows is named, and busy until its name is on the pod", pod: running,
			f:    Facts{Selected: true, Enforce: true, Zombie: &zombie, Now: now},
			want: Judgement{Judged: true, Protection: presets.Protection{Busy: true, Until: until}, Budget: true, Zombie: &zombie}},
		{name: "a named zombie is free and has no budget, and is not named again", pod: named,
			f: Facts{Selected: true, Enforce: true, Zombie: &zombie, Now: now}, want: Judgement{Judged: true}},
		{name: "a zombie of a namespace the webhooks do not act in is not named", pod: running,
			f: Facts{Enforce: true, Zombie: &zombie, Now: now}, want: Judgement{}},
		{name: "a drain deadline that names no setter frees nothing", pod: running,
			f:    Facts{Selected: true, Enforce: true, Node: drainingNode(now.Add(-time.Minute), ""), Now: now},
			want: Judgement{Judged: true, Protection: presets.Protection{Busy: true, Until: until}, Budget: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Judge(tc.pod, generic, tc.f))
		})
	}
}

// The namespace's budget holds every pod labelled held, by the label only
// runnerguard writes, and wants more of them than can exist, so none goes.
func TestBudget(t *testing.T) {
	b := Budget("ns")
	assert.Equal(t, "ns", b.Namespace)
	assert.Equal(t, BudgetName, b.Name)
	assert.Equal(t, intstr.FromInt32(math.MaxInt32), *b.Spec.MinAvailable)
	assert.Nil(t, b.Spec.MaxUnavailable, "a count needs no owner's scale")
	assert.Equal(t, map[string]string{runnerpod.BudgetLabel: BudgetHeld}, b.Spec.Selector.MatchLabels)
	assert.Equal(t, policyv1.IfHealthyBudget, *b.Spec.UnhealthyPodEvictionPolicy)
	assert.Empty(t, b.OwnerReferences, "it outlives each pod it holds")
	assert.Equal(t, BudgetManagedBy, b.Labels["app.kubernetes.io/managed-by"])
}

func TestBudgetLabelPlan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		budget bool
		want   *string
		ok     bool
	}{
		{name: "a pod that should be held is labelled held", budget: true, want: ptr.To(BudgetHeld), ok: true},
		{name: "a held pod stays so", labels: map[string]string{runnerpod.BudgetLabel: BudgetHeld}, budget: true},
		{name: "a pod labelled with its UID by an earlier release is labelled held", labels: map[string]string{runnerpod.BudgetLabel: "uid-p"}, budget: true, want: ptr.To(BudgetHeld), ok: true},
		{name: "a pod that should not be held loses the label", labels: map[string]string{runnerpod.BudgetLabel: BudgetHeld}, ok: true},
		{name: "and so does one an earlier release labelled", labels: map[string]string{runnerpod.BudgetLabel: "uid-p"}, ok: true},
		{name: "a pod without either: nothing to do"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podtest.Runner("ns", "p").Obj()
			pod.Labels = tc.labels
			got, ok := BudgetLabelPlan(pod, tc.budget)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
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
		"metadata": map[string]any{"namespace": "ns", "name": "r", "uid": "er-1", "finalizers": []any{arcscaleset.RegistrationFinalizer}},
		"spec":     map[string]any{"podTemplateSpec": map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "runner"}}}}},
		"status":   map[string]any{"jobRequestId": int64(42), "phase": "Running"},
	}}
	out, err := compactRecord(arcscaleset.Fleet{}.RecordFields())(er)
	require.NoError(t, err)
	c := out.(*unstructured.Unstructured)
	assert.NotContains(t, c.Object, "spec")
	assert.Equal(t, map[string]any{"jobRequestId": int64(42)}, c.Object["status"])
	assert.Equal(t, []string{arcscaleset.RegistrationFinalizer}, c.GetFinalizers())
	job, _ := arcscaleset.JobSignal(c, "er-1")
	assert.Equal(t, runnerpod.JobAssigned, job)

	unstructured.RemoveNestedField(er.Object, "status", "jobRequestId")
	out, err = compactRecord(arcscaleset.Fleet{}.RecordFields())(er)
	require.NoError(t, err)
	job, _ = arcscaleset.JobSignal(out.(*unstructured.Unstructured), "er-1")
	assert.Equal(t, runnerpod.JobNone, job)
}

// The leader keeps of an EphemeralRunner the field managers that date its
// job's write, and no other's, so it names a zombie as the guard would
// from the whole record.
func TestTheEphemeralRunnerCacheKeepsWhenItsJobWasGiven(t *testing.T) {
	given := podtest.Start.Add(-time.Hour)
	entry := func(manager, fields string, at time.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", Time: &metav1.Time{Time: at},
			FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	er := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "actions.github.com/v1alpha1", "kind": "EphemeralRunner",
		"metadata": map[string]any{"namespace": "ns", "name": "r", "uid": "er-1"}, "status": map[string]any{"jobId": "j", "phase": "Running"}}}
	er.SetManagedFields([]metav1.ManagedFieldsEntry{entry("manager", `{"f:spec":{"f:podTemplateSpec":{}}}`, given.Add(-time.Minute)),
		entry("manager", `{"f:status":{"f:phase":{}}}`, given.Add(-time.Minute)), entry("ghalistener", `{"f:status":{"f:jobId":{}}}`, given)})
	out, err := compactRecord(arcscaleset.Fleet{}.RecordFields())(er)
	require.NoError(t, err)
	c := out.(*unstructured.Unstructured)
	require.Len(t, c.GetManagedFields(), 1)
	assert.Equal(t, "ghalistener", c.GetManagedFields()[0].Manager)
	pod := podtest.ARCScaleSet("ns", "r").Running("runner").Obj()
	pod.CreationTimestamp, pod.OwnerReferences[0].UID = metav1.Time{Time: podtest.Start}, "er-1"
	fromCache, ok := fleet.ZombieOf(arcscaleset.Fleet{}, c, pod)
	assert.True(t, ok)
	fromRecord, _ := fleet.ZombieOf(arcscaleset.Fleet{}, er, pod)
	assert.Equal(t, fromRecord, fromCache)
}

// drainingNode is a node whose drain deadline is at, set by by.
func drainingNode(at time.Time, by string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-7", Annotations: map[string]string{
		runnerpod.DrainDeadline: at.UTC().Format(time.RFC3339), runnerpod.DrainDeadlineBy: by}}}
}
