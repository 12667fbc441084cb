package presets_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/arcworkflow"
	"github.com/runnerguard/runnerguard/internal/fleet/buildkite"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/fleet/jenkins"
	"github.com/runnerguard/runnerguard/internal/fleet/tekton"
	"github.com/runnerguard/runnerguard/internal/fleet/woodpecker"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		name       string
		pod        *corev1.Pod
		preset     runnerpod.PresetName
		containers []string
	}{
		{name: "an ARC scale-set pod is recognised by its label and owner", pod: podtest.ARCScaleSet("ci", "r").Obj(), preset: arcscaleset.Name, containers: []string{"runner"}},
		{name: "an ARC scale-set pod is recognised by its label alone", pod: labelOnlyARC(), preset: arcscaleset.Name, containers: []string{"runner"}},
		{name: "an ARC workflow pod is recognised by its runner-pod label", pod: podtest.ARCWorkflow("ci", "r").Obj(), preset: arcworkflow.Name, containers: []string{"job"}},
		{name: "a legacy ARC pod is recognised by its summerwind owner", pod: podtest.ARCLegacy("ci", "r").Obj(), preset: arclegacy.Name, containers: []string{"runner"}},
		{name: "a legacy ARC RunnerSet pod is recognised by its runnerset-name label", pod: podtest.Runner("ci", "r").Label(arclegacy.RunnerSetLabel, "rs").Obj(), preset: arclegacy.Name, containers: []string{"runner"}},
		{name: "a GitLab build pod is recognised by build and helper", pod: podtest.GitLab("ci", "g").Obj(), preset: gitlab.Name, containers: []string{"build"}},
		{name: "a TaskRun's pod is recognised by its label, its steps its runner containers", pod: podtest.Tekton("ci", "tr").Obj(), preset: tekton.Name, containers: []string{"step-build", "step-test"}},
		{name: "a step container without the TaskRun label is no runner", pod: podtest.Plain("ci", "x").Container("step-build").Obj()},
		{name: "a Woodpecker step's pod is recognised by its step label, its one container the step's", pod: podtest.Woodpecker("ci", "test").Obj(), preset: woodpecker.Name, containers: []string{"wp-01j9x2k7m3"}},
		{name: "a Buildkite job's pod is recognised by its job-uuid, the command, agent and checkout its runner containers", pod: podtest.Buildkite("ci", "0190").Obj(), preset: buildkite.Name, containers: []string{"container-0", "agent", "checkout"}},
		{name: "a Jenkins agent pod is recognised by its label digest, jnlp its runner container", pod: podtest.Jenkins("ci", "app-42").Obj(), preset: jenkins.Name, containers: []string{"jnlp"}},
		{name: "a plain runner container is a generic pool runner", pod: podtest.Runner("ci", "r").Obj(), preset: generic.Name, containers: []string{"runner"}},
		{name: "a job container without the runner-pod label is no runner", pod: podtest.Plain("ci", "x").Obj()},
		{name: "a build container without GitLab's helper is no runner", pod: buildOnly()},
		{name: "a runner container only among init containers is no runner", pod: initRunner()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := presets.Match(tc.pod, presets.Defaults())
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
