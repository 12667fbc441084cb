package death

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
)

// A TaskRun's steps are one job: its death is the step that ended it, and
// a step that ended well is no death of its own.
func TestAJobOfStepsDiesOnceByTheStepThatEndedIt(t *testing.T) {
	cases := []struct {
		name      string
		pod       *podtest.Wrapper
		container string // "" for no record
		class     Class
	}{
		{name: "every step under way", pod: podtest.Tekton("ci", "tr").Running("step-build").Running("step-test")},
		{name: "the first step done, the next under way",
			pod: podtest.Tekton("ci", "tr").Terminated("step-build", 0, "Completed").Running("step-test")},
		{name: "every step done: the last one's clean end",
			pod:       podtest.Tekton("ci", "tr").Terminated("step-build", 0, "Completed").Terminated("step-test", 0, "Completed"),
			container: "step-test", class: CleanExit},
		{name: "a step killed for memory, the next skipped because of it",
			pod:       podtest.Tekton("ci", "tr").Terminated("step-build", 137, "OOMKilled").Terminated("step-test", 1, "Error"),
			container: "step-build", class: CgroupOOM},
		{name: "a step failing with its own code is the job's result, not a death",
			pod:       podtest.Tekton("ci", "tr").Terminated("step-build", 1, "Error").Terminated("step-test", 1, "Error"),
			container: "step-build", class: JobFailed},
		{name: "Buildkite: a job that ended well is told by the part that ended last, not the first in the pod's order",
			pod: func() *podtest.Wrapper {
				w := podtest.Buildkite("ci", "j").Terminated("container-0", 0, "Completed").Terminated("agent", 0, "Completed").Terminated("checkout", 0, "Completed")
				for i := range w.Status.ContainerStatuses {
					if cs := &w.Status.ContainerStatuses[i]; cs.Name == "checkout" {
						cs.State.Terminated.FinishedAt.Time = cs.State.Terminated.StartedAt.Time // ran first, ended first
					}
				}
				return w
			}(),
			container: "agent", class: CleanExit},
		{name: "a step killed for memory while the next still waits",
			pod:       podtest.Tekton("ci", "tr").Terminated("step-build", 137, "OOMKilled").Running("step-test"),
			container: "step-build", class: CgroupOOM},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod.Obj()
			runner, ok := presets.Match(pod, configtest.Enforcing().Presets)
			require.True(t, ok)
			got := Deaths(pod, runner)
			if tc.container == "" {
				assert.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			assert.Equal(t, tc.container, got[0].Container)
			assert.Equal(t, string(tc.class), got[0].Class)
		})
	}
}
