package inject

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/podtest"
	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

const (
	requester  = "system:serviceaccount:ci:runner-manager"
	printToOut = "ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT"
	fallback   = corev1.TerminationMessageFallbackToLogsOnError
	termPath   = corev1.TerminationMessagePathDefault
)

// marked adds what every instrumented runner pod gets in its metadata.
func marked(w *podtest.Wrapper, preset runnerpod.PresetName) *podtest.Wrapper {
	return w.Annotate(runnerpod.KarpenterDoNotDisrupt, "true").
		Annotate(runnerpod.ClusterAutoscalerSafeEvict, "false").
		Annotate(runnerpod.PresetAnnotation, string(preset)).Label(runnerpod.RunnerLabel, "true")
}

// withVitals adds the sidecar, its volumes and the runners' mounts the way
// the contract describes them.
func withVitals(w *podtest.Wrapper, v config.Vitals, runners ...string) *podtest.Wrapper {
	w.Spec.InitContainers = slices.Insert(w.Spec.InitContainers, 0, Sidecar(v))
	w.Spec.Volumes = append(w.Spec.Volumes, Volumes(v)...)
	for i, c := range w.Spec.Containers {
		if slices.Contains(runners, c.Name) {
			w.Spec.Containers[i].VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VitalsVolume, MountPath: v.MountPath, ReadOnly: true})
		}
	}
	return w
}

func TestMutate(t *testing.T) {
	def := config.Default()
	noVitals := config.Default()
	noVitals.Inject.Vitals.Enabled = false
	keepPolicy := config.Default()
	keepPolicy.Inject.TerminationMessagePolicy = false
	twoRunners := config.Default()
	for i := range twoRunners.Presets {
		if twoRunners.Presets[i].Name == runnerpod.Generic {
			twoRunners.Presets[i].RunnerContainers = []string{"runner", "runner-b"}
		}
	}
	restricted := Facts{Requester: requester, HostMountRefused: HostMountRefusal("ci", map[string]string{psaEnforceLabel: psaBaseline})}
	noSidecarResources := Sidecar(def.Inject.Vitals)
	noSidecarResources.Resources = corev1.ResourceRequirements{}
	podRequests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}

	cases := []struct {
		name  string
		cfg   config.Config
		facts Facts
		pod   *corev1.Pod
		want  *corev1.Pod
		out   Outcome
	}{{
		name: "a pod with no runner container is left alone",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  podtest.Plain("ci", "web").Obj(),
		want: podtest.Plain("ci", "web").Obj(),
		out:  Outcome{Result: NotRunner},
	}, {
		name: "a mirror pod is left alone even when it runs a runner",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  podtest.Runner("ci", "p").Annotate(corev1.MirrorPodAnnotationKey, "x").Obj(),
		want: podtest.Runner("ci", "p").Annotate(corev1.MirrorPodAnnotationKey, "x").Obj(),
		out:  Outcome{Result: Mirror},
	}, {
		name: "a runner pod that opts out is left alone but for the watcher's label (its death is on record too)",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  podtest.Runner("ci", "p").Annotate(runnerpod.Inject, "False").Obj(),
		want: podtest.Runner("ci", "p").Annotate(runnerpod.Inject, "False").Label(runnerpod.RunnerLabel, "true").Obj(),
		out:  Outcome{Result: OptedOut, Preset: runnerpod.Generic},
	}, {
		name: "an opted-out GitLab pod still gets its creator recorded, overwriting a forged one",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  podtest.GitLab("ci", "g").Annotate(runnerpod.Inject, "false").Annotate(runnerpod.CreatedBy, "forged").Obj(),
		want: podtest.GitLab("ci", "g").Annotate(runnerpod.Inject, "false").Annotate(runnerpod.CreatedBy, requester).Label(runnerpod.RunnerLabel, "true").Obj(),
		out:  Outcome{Result: OptedOut, Preset: runnerpod.GitLab},
	}, {
		name: "an unparsable opt-out is instrumented with a warning naming the annotation",
		cfg:  noVitals, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").Annotate(runnerpod.Inject, "off").Obj(),
		want: marked(podtest.Runner("ci", "p").Annotate(runnerpod.Inject, "off"), runnerpod.Generic).
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: runnerpod.Generic, Warnings: []string{
			`runnerguard: annotation runnerguard.io/inject="off" is not a boolean (true or false); the pod is instrumented`,
		}},
	}, {
		name: "the sidecar goes first, before the pod's own native sidecar",
		cfg:  def, facts: Facts{Requester: requester},
		pod: podtest.ARCScaleSet("ci", "p").Obj(),
		want: withVitals(marked(podtest.ARCScaleSet("ci", "p"), runnerpod.ARCScaleSet), def.Inject.Vitals, "runner").
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: Injected, Preset: runnerpod.ARCScaleSet},
	}, {
		name: "the author's env value and termination policy and path are kept",
		cfg:  noVitals, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").Env("runner", printToOut, "0").
			TerminationMessage("runner", fallback, "/tmp/last").Annotate(runnerpod.KarpenterDoNotDisrupt, "false").Obj(),
		want: marked(podtest.Runner("ci", "p").Env("runner", printToOut, "0").
			TerminationMessage("runner", fallback, "/tmp/last").Annotate(runnerpod.KarpenterDoNotDisrupt, "false"), runnerpod.Generic).
			Annotate(runnerpod.KarpenterDoNotDisrupt, "false").Obj(),
		out: Outcome{Result: NoSidecar, Preset: runnerpod.Generic},
	}, {
		name:  "the termination policy is left as it is when the config says so",
		cfg:   func() config.Config { c := keepPolicy; c.Inject.Vitals.Enabled = false; return c }(),
		facts: Facts{Requester: requester},
		pod:   podtest.Runner("ci", "p").Obj(),
		want:  marked(podtest.Runner("ci", "p"), runnerpod.Generic).Env("runner", printToOut, "1").Obj(),
		out:   Outcome{Result: NoSidecar, Preset: runnerpod.Generic},
	}, {
		name: "every runner container of the preset is instrumented, other containers are not",
		cfg:  twoRunners, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").Container("runner-b").Container("cache").Obj(),
		want: withVitals(marked(podtest.Runner("ci", "p").Container("runner-b").Container("cache"), runnerpod.Generic), def.Inject.Vitals, "runner", "runner-b").
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).
			Env("runner-b", printToOut, "1").TerminationMessage("runner-b", fallback, termPath).Obj(),
		out: Outcome{Result: Injected, Preset: runnerpod.Generic},
	}, {
		name: "a GitLab build pod records its real creator over the one it claims",
		cfg:  noVitals, facts: Facts{Requester: requester},
		pod: podtest.GitLab("ci", "p").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:someone-else").Obj(),
		want: marked(podtest.GitLab("ci", "p"), runnerpod.GitLab).Annotate(runnerpod.CreatedBy, requester).
			TerminationMessage("build", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: runnerpod.GitLab},
	}, {
		name: "a runner whose owner does not end the job by deleting it gets no creator",
		cfg:  noVitals, facts: Facts{Requester: requester},
		pod: podtest.ARCLegacy("ci", "p").Obj(),
		want: marked(podtest.ARCLegacy("ci", "p"), runnerpod.ARCLegacy).
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: runnerpod.ARCLegacy},
	}, {
		name: "a namespace whose Pod Security level forbids hostPath gets everything but the sidecar",
		cfg:  def, facts: restricted,
		pod: podtest.Runner("ci", "p").Obj(),
		want: marked(podtest.Runner("ci", "p"), runnerpod.Generic).
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: runnerpod.Generic, Warnings: []string{"runnerguard: vitals sidecar not injected: " + restricted.HostMountRefused}},
	}, {
		name: "a Windows pod gets no sidecar and a warning",
		cfg:  def, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").OS(corev1.Windows).Obj(),
		want: marked(podtest.Runner("ci", "p").OS(corev1.Windows), runnerpod.Generic).
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: runnerpod.Generic, Warnings: []string{"runnerguard: vitals sidecar not injected: the pod runs on Windows, which has no cgroup filesystem to read"}},
	}, {
		name: "a regular container with the sidecar's name keeps the sidecar out",
		cfg:  def, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").Container(ContainerName).Obj(),
		want: marked(podtest.Runner("ci", "p").Container(ContainerName), runnerpod.Generic).
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: runnerpod.Generic, Warnings: []string{`runnerguard: vitals sidecar not injected: the pod already has a container named "runnerguard-vitals"`}},
	}, {
		name: "a runner that already mounts something at the vitals path keeps it and is warned about",
		cfg:  def, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").Mount("runner", "mine", def.Inject.Vitals.MountPath).Obj(),
		want: func() *corev1.Pod {
			w := marked(podtest.Runner("ci", "p").Mount("runner", "mine", def.Inject.Vitals.MountPath), runnerpod.Generic).
				Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath)
			w.Spec.InitContainers = []corev1.Container{Sidecar(def.Inject.Vitals)}
			w.Spec.Volumes = append(w.Spec.Volumes, Volumes(def.Inject.Vitals)...)
			return w.Obj()
		}(),
		out: Outcome{Result: Injected, Preset: runnerpod.Generic, Warnings: []string{`runnerguard: container "runner" already mounts a volume at /runnerguard/vitals; the vitals files are not mounted there`}},
	}, {
		name: "with pod-level resources the sidecar shares the pod's budget",
		cfg:  def, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").PodResources(podRequests).Obj(),
		want: func() *corev1.Pod {
			w := withVitals(marked(podtest.Runner("ci", "p").PodResources(podRequests), runnerpod.Generic), def.Inject.Vitals, "runner").
				Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath)
			w.Spec.InitContainers[0] = noSidecarResources
			return w.Obj()
		}(),
		out: Outcome{Result: Injected, Preset: runnerpod.Generic},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Mutate(tc.pod, tc.facts, tc.cfg)
			assert.Equal(t, tc.out, out)
			assert.Equal(t, tc.want, tc.pod)
		})
	}
}

func TestHostMountRefusal(t *testing.T) {
	cases := []struct {
		name   string
		labels map[string]string
		refuse bool
	}{
		{name: "a namespace without Pod Security labels allows the host mount", labels: nil},
		{name: "the privileged level allows the host mount", labels: map[string]string{psaEnforceLabel: "privileged"}},
		{name: "the baseline level refuses it", labels: map[string]string{psaEnforceLabel: "baseline"}, refuse: true},
		{name: "the restricted level refuses it", labels: map[string]string{psaEnforceLabel: "restricted"}, refuse: true},
		{name: "a level that is only warned or audited allows it", labels: map[string]string{"pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/audit": "restricted"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := HostMountRefusal("ci", tc.labels)
			if tc.refuse {
				assert.Contains(t, got, `namespace "ci" enforces Pod Security level "`+tc.labels[psaEnforceLabel]+`"`)
			} else {
				assert.Empty(t, got)
			}
		})
	}
}
