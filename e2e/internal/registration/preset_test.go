package registration

import (
	"fmt"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/arcworkflow"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/fleet/tekton"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
)

// The policy fixes a pod's preset at its creation: it restates
// presets.Match in CEL (the variables presetBefore and presetAfter) to
// tell whether an update changes the preset. They are two writings of one
// decision; this test holds them together over every combination of the
// marks Match reads, for the default presets and for presets disabled or
// given other containers: a preset the CEL got wrong would refuse a
// fleet's own update or let one fleet turn another's runner into its own.
func TestPolicyPresetAgreesWithMatch(t *testing.T) {
	configs := map[string]func(*config.Config){
		"defaults": func(*config.Config) {},
		"gitlab and arc-scale-set disabled, generic on other containers": func(c *config.Config) {
			for i := range c.Presets {
				switch c.Presets[i].Name {
				case gitlab.Name, arcscaleset.Name:
					c.Presets[i].Enabled = false
				case generic.Name:
					c.Presets[i].RunnerContainers = []string{"agent", "build"}
				}
			}
		},
		"generic on a prefix": func(c *config.Config) {
			for i := range c.Presets {
				if c.Presets[i].Name == generic.Name {
					c.Presets[i].RunnerContainers = []string{"agent", "step-*"}
				}
			}
		},
	}
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType), cel.OptionalTypes())
	require.NoError(t, err)
	for name, configure := range configs {
		t.Run(name, func(t *testing.T) {
			cfg := configtest.Enforcing()
			configure(&cfg)
			var before, after cel.Program
			for _, v := range render(t, cfg, Options{}).Policy.Spec.Variables {
				if v.Name != "presetBefore" && v.Name != "presetAfter" {
					continue
				}
				ast, iss := env.Compile(v.Expression)
				require.NoError(t, iss.Err(), v.Name)
				prg, err := env.Program(ast)
				require.NoError(t, err, v.Name)
				if v.Name == "presetBefore" {
					before = prg
				} else {
					after = prg
				}
			}
			require.NotNil(t, before, "the policy's presetBefore")
			require.NotNil(t, after, "the policy's presetAfter")
			n := 0
			for _, pod := range markCombinations() {
				obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
				require.NoError(t, err)
				want := ""
				if r, ok := presets.Match(pod, cfg.Presets); ok {
					want = string(r.Preset.Name)
				}
				for what, prg := range map[string]cel.Program{"presetBefore": before, "presetAfter": after} {
					out, _, err := prg.Eval(map[string]any{"object": obj, "oldObject": obj})
					require.NoError(t, err)
					require.Equal(t, want, out.Value(), "%s of %s", what, describe(pod))
				}
				n++
			}
			require.Greater(t, n, 500, "the combinations cover the marks")
		})
	}
}

// markCombinations are pods with every combination of the marks
// presets.Match reads: containers, the preset labels, legacy ARC's
// annotation and owner references.
func markCombinations() []*corev1.Pod {
	containerSets := [][]string{{"runner"}, {"job"}, {"build", "helper"}, {"build"}, {"runner", "docker"}, {"app"}, {"agent"}, {"job", "runner"}, {"step-build"}, {"stepbuild"}, {"wp-01j9"}, {"jnlp"}, {"container-0", "agent", "checkout"}}
	// Each fleet's own labels alone, and pairs that two fleets could both
	// claim.
	labelSets := [][]string{nil, {arcscaleset.Label, arclegacy.RunnerSetLabel}, {tekton.TaskRunLabel, arcworkflow.PodLabel}}
	for _, f := range presets.All {
		for _, l := range f.Traits().MarkLabels {
			labelSets = append(labelSets, []string{l})
		}
	}
	er := func(apiVersion, kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "o", UID: "u", Controller: ptr.To(controller)}
	}
	ownerSets := [][]metav1.OwnerReference{
		nil,
		{er("actions.github.com/v1alpha1", arcscaleset.Kind, true)},
		{er("actions.github.com/v1alpha1", arcscaleset.Kind, false)},
		{er("example.com/v1", arcscaleset.Kind, true)},
		{er("actions.github.com", arcscaleset.Kind, true)},
		{er("actions.summerwind.dev/v1alpha1", "Runner", true)},
		{er("actions.summerwind.dev", "Runner", true)},
		{er("apps/v1", "StatefulSet", true)},
	}
	var pods []*corev1.Pod
	for _, cs := range containerSets {
		for _, ls := range labelSets {
			for _, unregistered := range []bool{false, true} {
				for _, owners := range ownerSets {
					w := podtest.Plain("ci", "p")
					w.Spec.Containers = nil
					for _, c := range cs {
						w = w.Container(c)
					}
					for _, l := range ls {
						w = w.Label(l, "x")
					}
					if unregistered {
						w = w.Annotate(arclegacy.Unregistered, "2026-11-25T00:00:00Z")
					}
					pod := w.Obj()
					pod.OwnerReferences = owners
					pods = append(pods, pod)
				}
			}
		}
	}
	return pods
}

func describe(pod *corev1.Pod) string {
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	return fmt.Sprintf("containers %v, labels %v, annotations %v, owners %v", names, pod.Labels, pod.Annotations, pod.OwnerReferences)
}
