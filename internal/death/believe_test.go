package death

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// A note that rests on the pod's own state is believed only when the pod,
// as the watcher saw it, agrees: a review anyone may post cannot make a
// drained busy job read as its normal end.
func TestANoteIsBelievedOnlyWhereThePodAgrees(t *testing.T) {
	at := podtest.Start.Add(time.Hour)
	cases := []struct {
		name     string
		pod      *podtest.Wrapper
		by, rule string
		believed bool
	}{
		{name: "Buildkite: the job over once its agent ended", pod: podtest.Buildkite("ci", "j").Terminated("agent", 0, "Completed").Running("container-0"),
			by: "system:serviceaccount:kube-system:job-controller", rule: "job-over", believed: true},
		{name: "Buildkite: a job-over note while the agent still ran is a forged review's", pod: podtest.Buildkite("ci", "j").Running("agent").Running("container-0"),
			by: "system:serviceaccount:kube-system:job-controller", rule: "job-over"},
		{name: "a pool's idle mark on the pod", pod: podtest.Runner("ci", "r").Running("runner").Annotate(generic.IdleAnnotation, "true"), by: "pool", rule: "idle", believed: true},
		{name: "a pool's lapsed lease at the note's time", pod: podtest.Runner("ci", "r").Running("runner").Annotate(generic.IdleAnnotation, at.Add(-time.Minute).Format(time.RFC3339)), by: "pool", rule: "idle", believed: true},
		{name: "an idle note for a runner the pool held", pod: podtest.Runner("ci", "r").Running("runner").Annotate(generic.IdleAnnotation, at.Add(time.Minute).Format(time.RFC3339)), by: "pool", rule: "idle"},
		{name: "the recorded creator ending its job", pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "glr"), by: "glr", rule: "job-owner", believed: true},
		{name: "a job-owner note naming someone else", pod: podtest.GitLab("ci", "g").Running("build").Annotate(runnerpod.CreatedBy, "glr"), by: "reaper", rule: "job-owner"},
		{name: "ARC's record decides, not the pod: its note stands", pod: podtest.ARCScaleSet("ci", "a").Running("runner"), by: "arc", rule: "idle", believed: true},
		{name: "a note of a rule on the pod's state names its deleter as before", pod: podtest.Runner("ci", "r").Terminated("runner", 0, "Completed"), by: "reaper", rule: "runner-terminated", believed: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod.Obj()
			runner, ok := presets.Match(pod, configtest.Enforcing().Presets)
			require.True(t, ok)
			n := &v1alpha1.DeletionNote{UID: string(pod.UID), Requester: tc.by, Rule: tc.rule, Time: metav1.NewTime(at)}
			got := believed(n, Observation{Pod: pod, Runner: runner})
			assert.Equal(t, tc.believed, got != nil)
		})
	}
}
