package runnerpod_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		name       string
		pod        *corev1.Pod
		preset     runnerpod.PresetName
		containers []string
	}{
		{name: "an ARC scale-set pod is recognised by its label and owner", pod: podtest.ARCScaleSet("ci", "r").Obj(), preset: runnerpod.ARCScaleSet, containers: []string{"runner"}},
		{name: "an ARC scale-set pod is recognised by its label alone", pod: labelOnlyARC(), preset: runnerpod.ARCScaleSet, containers: []string{"runner"}},
		{name: "an ARC workflow pod is recognised by its runner-pod label", pod: podtest.ARCWorkflow("ci", "r").Obj(), preset: runnerpod.ARCWorkflow, containers: []string{"job"}},
		{name: "a legacy ARC pod is recognised by its summerwind owner", pod: podtest.ARCLegacy("ci", "r").Obj(), preset: runnerpod.ARCLegacy, containers: []string{"runner"}},
		{name: "a legacy ARC RunnerSet pod is recognised by its runnerset-name label", pod: podtest.Runner("ci", "r").Label(runnerpod.ARCLegacyRunnerSetLabel, "rs").Obj(), preset: runnerpod.ARCLegacy, containers: []string{"runner"}},
		{name: "a GitLab build pod is recognised by build and helper", pod: podtest.GitLab("ci", "g").Obj(), preset: runnerpod.GitLab, containers: []string{"build"}},
		{name: "a plain runner container is a generic pool runner", pod: podtest.Runner("ci", "r").Obj(), preset: runnerpod.Generic, containers: []string{"runner"}},
		{name: "a job container without the runner-pod label is no runner", pod: podtest.Plain("ci", "x").Obj()},
		{name: "a build container without GitLab's helper is no runner", pod: buildOnly()},
		{name: "a runner container only among init containers is no runner", pod: initRunner()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := runnerpod.Match(tc.pod, runnerpod.DefaultPresets())
			assert.Equal(t, tc.preset != "", ok)
			assert.Equal(t, tc.preset, r.Preset.Name)
			assert.Equal(t, tc.containers, r.Containers)
		})
	}
}

func labelOnlyARC() *corev1.Pod {
	w := podtest.ARCScaleSet("ci", "r")
	w.OwnerReferences = nil
	return w.Obj()
}

func buildOnly() *corev1.Pod {
	w := podtest.Plain("ci", "b")
	w.Spec.Containers[0].Name = "build"
	return w.Obj()
}

func initRunner() *corev1.Pod {
	w := podtest.Plain("ci", "i")
	w.Spec.InitContainers = []corev1.Container{{Name: "runner"}}
	return w.Obj()
}

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
