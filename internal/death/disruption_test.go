package death

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/refusal"
)

// disrupted gives the pod a true DisruptionTarget condition of reason,
// set at (zero: undated, as a pods/status writer may leave it).
func disrupted(w *podtest.Wrapper, reason string, at time.Time) *podtest.Wrapper {
	w.Status.Conditions = append(w.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: reason, LastTransitionTime: metav1.Time{Time: at}})
	return w
}

// refusedBy keeps on the pod the guard's refusal of by's verb at at.
func refusedBy(t *testing.T, w *podtest.Wrapper, by, verb string, at time.Time) *podtest.Wrapper {
	l := refusal.Add(v1alpha1.Refusals{}, refusal.One{By: by, Verb: verb, Rule: "busy", At: at})
	v, err := refusal.Format(l)
	require.NoError(t, err)
	return w.Annotate(refusal.Annotation, v)
}

func TestADisruptionCountsOnlyWhenItsDeletionEndedTheRunner(t *testing.T) {
	const operator = "olga@example.com"
	set := end.Add(-20 * time.Minute) // when the scheduler marked the runner
	cases := []struct {
		name   string
		pod    *podtest.Wrapper
		goneAt time.Time
		note   *v1alpha1.DeletionNote
		want   Class
		// basis: what the record's basis says of the condition (none:
		// nothing); notBasis: what it does not say.
		basis    []string
		notBasis string
	}{
		// The scheduler's delete of a busy runner passes in warn mode (rule
		// busy), or once its protection ran out.
		{name: "the scheduler's own delete right after it marked the runner is a preemption",
			pod:  disrupted(podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-30*time.Second), 30), reasonPreemption, end.Add(-31*time.Second)),
			note: note(kubeScheduler, "busy", end.Add(-30*time.Second)), want: Preempted},
		{name: "a preemption carried out by an unreviewed delete is told by its time alone",
			pod:  disrupted(podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-30*time.Second), 30), reasonPreemption, end.Add(-31*time.Second)),
			want: Preempted},
		{name: "a stale preemption, its delete refused, then an operator's drain: the operator's delete ended it",
			pod: refusedBy(t, disrupted(podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-30*time.Second), 30), reasonPreemption, set),
				kubeScheduler, "delete", set.Add(time.Second)),
			note: note(operator, "override", end.Add(-30*time.Second)), want: SigTerm,
			basis: []string{"the pod carried DisruptionTarget PreemptionByScheduler (set at 2026-11-01T11:50:00Z), which did not end the runner",
				"its deletion began at 2026-11-01T12:09:30Z, 19m30s from the condition",
				"refused: delete by system:kube-scheduler at 2026-11-01T11:50:01Z"}},
		{name: "the scheduler's preemption, tried again and refused long after its condition was set, is said refused",
			pod: refusedBy(t, disrupted(podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-30*time.Second), 30), reasonPreemption, set),
				kubeScheduler, "delete", end.Add(-time.Minute)),
			note: note(operator, "override", end.Add(-30*time.Second)), want: SigTerm,
			basis: []string{"refused: delete by system:kube-scheduler at 2026-11-01T12:09:00Z"}},
		{name: "another principal's refusal long after the condition was set is not the disruption's",
			pod: refusedBy(t, disrupted(podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-30*time.Second), 30), reasonPreemption, set),
				"reaper", "delete", end.Add(-time.Minute)),
			note: note(operator, "override", end.Add(-30*time.Second)), want: SigTerm,
			basis: []string{"19m30s from the condition"}, notBasis: "refused"},
		{name: "a preemption's condition set just before another principal's delete does not make it one",
			pod:  disrupted(podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-30*time.Second), 30), reasonPreemption, end.Add(-35*time.Second)),
			note: note(operator, "override", end.Add(-30*time.Second)), want: SigTerm,
			basis: []string{"its deletion was asked for by olga@example.com, not system:kube-scheduler"}},
		{name: "an undated condition written through pods/status counts for nothing",
			pod:  disrupted(podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Deleted(end.Add(-30*time.Second), 30), reasonPreemption, time.Time{}),
			note: note(operator, "override", end.Add(-30*time.Second)), want: SigTerm,
			basis: []string{"the condition is not dated"}},
		{name: "a runner killed with a preemption's condition on its pod and no deletion is not preempted",
			pod: disrupted(podtest.Runner("ci", "r").Terminated("runner", 137, "Error"), reasonPreemption, set), want: SigKill,
			basis: []string{"the pod was not deleted"}},
		{name: "a runner removed at once long after a stale preemption is deleted-running",
			pod: disrupted(podtest.Runner("ci", "r").Running("runner"), reasonPreemption, set), goneAt: end,
			note: note(operator, "override", end), want: DeletedRunning,
			basis: []string{"which did not end the runner"}},
		{name: "a runner removed at once by pod GC just after it marked the pod is a lost node",
			pod: disrupted(podtest.Runner("ci", "r").Running("runner"), reasonDeletionByPodGC, end.Add(-time.Second)), goneAt: end, want: NodeLost},
		{name: "a stale pod GC condition does not make a reaper's force delete a lost node",
			pod: disrupted(podtest.Runner("ci", "r").Running("runner"), reasonDeletionByPodGC, set), goneAt: end,
			note: note("reaper", "override", end), want: DeletedRunning,
			basis: []string{"the pod carried DisruptionTarget DeletionByPodGC"}},
		{name: "a kubelet's shutdown is not a deletion's disruption: nothing said of it",
			pod:  disrupted(podtest.Runner("ci", "r").Terminated("runner", 143, "Error").Reason("Terminated"), reasonTerminationByKubelet, set),
			want: NodeDisrupted},
	}
	cfg := configtest.Enforcing()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := overriddenFor(tc.pod, tc.note).Obj()
			runner, ok := presets.Match(pod, cfg.Presets)
			require.True(t, ok)
			now := end.Add(deletion.NoteWait + time.Minute)
			p := Decide(Observation{Pod: pod, Runner: runner, GoneAt: tc.goneAt, Note: tc.note, Now: now,
				KeepSince: now.Add(-cfg.Records.MaxAge.Duration), CleanSince: now.Add(-cfg.Records.CleanMaxAge.Duration)})
			require.Len(t, p.Records, 1)
			r := p.Records[0]
			assert.Equal(t, string(tc.want), r.Class)
			require.NotNil(t, r.Disruption, "the record keeps the condition either way")
			if len(tc.basis) == 0 {
				assert.NotContains(t, r.ClassBasis, "DisruptionTarget")
			}
			for _, b := range tc.basis {
				assert.Contains(t, r.ClassBasis, b)
			}
			if tc.notBasis != "" {
				assert.NotContains(t, r.ClassBasis, tc.notBasis)
			}
		})
	}
}
