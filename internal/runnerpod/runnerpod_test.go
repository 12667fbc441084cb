package runnerpod_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestRunnerStatus(t *testing.T) {
	runner := []string{"runner"}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want runnerpod.State
		exit int32
	}{
		{name: "no status is not started", pod: podtest.Runner("ci", "r").Obj(), want: runnerpod.NotStarted},
		{name: "waiting without a past run is not started", pod: podtest.Runner("ci", "r").Waiting("runner", "ContainerCreating").Obj(), want: runnerpod.NotStarted},
		{name: "running is running", pod: podtest.Runner("ci", "r").Running("runner").Obj(), want: runnerpod.Running},
		{name: "terminated is terminated", pod: podtest.Runner("ci", "r").Terminated("runner", 3, "Error").Obj(), want: runnerpod.Terminated, exit: 3},
		{name: "waiting after a run is terminated, from the last state", pod: podtest.Runner("ci", "r").Restarting("runner", 2, "Error").Obj(), want: runnerpod.Terminated, exit: 2},
		{name: "running again after restarts is running", pod: podtest.Runner("ci", "r").Restarting("runner", 2, "Error").Running("runner").Obj(), want: runnerpod.Running},
		{name: "other containers' states do not count", pod: podtest.Runner("ci", "r").Running("sidecar").Obj(), want: runnerpod.NotStarted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := runnerpod.RunnerStatus(tc.pod, runner)
			assert.Equal(t, tc.want, st.State)
			if tc.want == runnerpod.Terminated {
				assert.Equal(t, tc.exit, st.Terminated.ExitCode)
			} else {
				assert.Nil(t, st.Terminated)
			}
		})
	}
}
