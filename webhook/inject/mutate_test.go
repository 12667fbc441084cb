package inject

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const (
	requester  = "system:serviceaccount:ci:runner-manager"
	printToOut = "ACTIONS_RUNNER_PRINT_LOG_TO_STDOUT"
	fallback   = corev1.TerminationMessageFallbackToLogsOnError
	termPath   = corev1.TerminationMessagePathDefault
)

// marked adds what every instrumented runner pod gets in its metadata (the
// autoscalers' marks are the leader's to set, while the runner is busy).
func marked(w *podtest.Wrapper, preset runnerpod.PresetName) *podtest.Wrapper {
	return w.Annotate(runnerpod.PresetAnnotation, string(preset)).Annotate(runnerpod.CreatedBy, requester).Annotate(runnerpod.CreatedFrom, "").Label(runnerpod.RunnerLabel, "true")
}

// withVitals adds the sidecar, its volumes and the runners' mounts the way
// the contract describes them, for a BestEffort pod: a sidecar without
// resources.
func withVitals(w *podtest.Wrapper, v config.Vitals, runners ...string) *podtest.Wrapper {
	sc := Sidecar(v)
	sc.Resources = corev1.ResourceRequirements{}
	w.Spec.InitContainers = slices.Insert(w.Spec.InitContainers, 0, sc)
	w.Spec.Volumes = append(w.Spec.Volumes, Volumes(v)...)
	for i, c := range w.Spec.Containers {
		if slices.Contains(runners, c.Name) {
			w.Spec.Containers[i].VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VitalsVolume, MountPath: v.MountPath, ReadOnly: true})
		}
	}
	return w
}

func TestMutate(t *testing.T) {
	def := configtest.Enforcing()
	noVitals := configtest.Enforcing()
	noVitals.Inject.Vitals.Enabled = false
	keepPolicy := configtest.Enforcing()
	keepPolicy.Inject.TerminationMessagePolicy = false
	twoRunners := configtest.Enforcing()
	for i := range twoRunners.Presets {
		if twoRunners.Presets[i].Name == generic.Name {
			twoRunners.Presets[i].RunnerContainers = []string{"runner", "runner-b"}
		}
	}
	restricted := Facts{Requester: requester, HostMountRefused: HostMountRefusal("ci", map[string]string{psaEnforceLabel: "baseline"}, "")}
	podRequests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	tightRequests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("128Mi")}
	clashWarning := `runnerguard: vitals sidecar not injected: the pod has a container named "runnerguard-vitals" that is not the sidecar runnerguard builds (the pod's own, or one copied under another runnerguard version or configuration); the node's cgroup filesystem is mounted only into runnerguard's own sidecar; rename the pod's own container, or create the pod from its template rather than from a copy of an instrumented pod`
	// forged is the injector's sidecar with one change an author could make
	// to get the host mount into a container of their own.
	forged := func(change func(*corev1.Container)) *podtest.Wrapper {
		c := Sidecar(def.Inject.Vitals)
		c.Resources = corev1.ResourceRequirements{} // as built for this BestEffort pod
		change(&c)
		w := podtest.Runner("ci", "p")
		w.Spec.InitContainers = []corev1.Container{c}
		return w
	}
	withToken := func(w *podtest.Wrapper) *podtest.Wrapper {
		w.Spec.InitContainers[0].VolumeMounts = append(w.Spec.InitContainers[0].VolumeMounts,
			corev1.VolumeMount{Name: "kube-api-access-x1", MountPath: serviceAccountTokenPath, ReadOnly: true})
		return w
	}
	instrumented := func() *podtest.Wrapper {
		return withVitals(marked(podtest.Runner("ci", "p"), generic.Name), def.Inject.Vitals, "runner").
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath)
	}
	notInjected := func(w *podtest.Wrapper) *corev1.Pod {
		return marked(w, generic.Name).Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj()
	}

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
		name: "a runner pod that opts out is left alone but for the watcher's label (its death is on record too) and its creator",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  podtest.Runner("ci", "p").Annotate(runnerpod.Inject, "False").Obj(),
		want: podtest.Runner("ci", "p").Annotate(runnerpod.Inject, "False").Annotate(runnerpod.CreatedBy, requester).Annotate(runnerpod.CreatedFrom, "").Label(runnerpod.RunnerLabel, "true").Obj(),
		out:  Outcome{Result: OptedOut, Preset: generic.Name},
	}, {
		name: "an opted-out GitLab pod still gets its creator recorded, overwriting a forged one",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  podtest.GitLab("ci", "g").Annotate(runnerpod.Inject, "false").Annotate(runnerpod.CreatedBy, "forged").Obj(),
		want: podtest.GitLab("ci", "g").Annotate(runnerpod.Inject, "false").Annotate(runnerpod.CreatedBy, requester).Annotate(runnerpod.CreatedFrom, "").Label(runnerpod.RunnerLabel, "true").Obj(),
		out:  Outcome{Result: OptedOut, Preset: gitlab.Name},
	}, {
		name: "an unparsable opt-out is instrumented with a warning naming the annotation",
		cfg:  noVitals, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").Annotate(runnerpod.Inject, "off").Obj(),
		want: marked(podtest.Runner("ci", "p").Annotate(runnerpod.Inject, "off"), generic.Name).
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{
			`runnerguard: annotation runnerguard.io/inject="off" is not a boolean; the pod is instrumented; set it to "true", or "false" to opt the pod out`,
		}},
	}, {
		name: "the sidecar goes first, before the pod's own native sidecar",
		cfg:  def, facts: Facts{Requester: requester},
		pod: podtest.ARCScaleSet("ci", "p").Obj(),
		want: withVitals(marked(podtest.ARCScaleSet("ci", "p"), arcscaleset.Name), def.Inject.Vitals, "runner").
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: Injected, Preset: arcscaleset.Name},
	}, {
		name: "the author's env value, termination policy and path and annotations are kept; configured annotations are added where absent",
		cfg: func() config.Config {
			c := noVitals
			c.Marks.Karpenter = false
			c.Inject.PodAnnotations = map[string]string{runnerpod.KarpenterDoNotDisrupt: "true", "example.com/team": "ci"}
			return c
		}(),
		facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").Env("runner", printToOut, "0").
			TerminationMessage("runner", fallback, "/tmp/last").Annotate(runnerpod.KarpenterDoNotDisrupt, "false").Obj(),
		want: marked(podtest.Runner("ci", "p").Env("runner", printToOut, "0").
			TerminationMessage("runner", fallback, "/tmp/last").Annotate(runnerpod.KarpenterDoNotDisrupt, "false"), generic.Name).
			Annotate("example.com/team", "ci").Obj(),
		out: Outcome{Result: NoSidecar, Preset: generic.Name},
	}, {
		name:  "the termination policy is left as it is when the config says so",
		cfg:   func() config.Config { c := keepPolicy; c.Inject.Vitals.Enabled = false; return c }(),
		facts: Facts{Requester: requester},
		pod:   podtest.Runner("ci", "p").Obj(),
		want:  marked(podtest.Runner("ci", "p"), generic.Name).Env("runner", printToOut, "1").Obj(),
		out:   Outcome{Result: NoSidecar, Preset: generic.Name},
	}, {
		name: "every runner container of the preset is instrumented, other containers are not",
		cfg:  twoRunners, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").Container("runner-b").Container("cache").Obj(),
		want: withVitals(marked(podtest.Runner("ci", "p").Container("runner-b").Container("cache"), generic.Name), def.Inject.Vitals, "runner", "runner-b").
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).
			Env("runner-b", printToOut, "1").TerminationMessage("runner-b", fallback, termPath).Obj(),
		out: Outcome{Result: Injected, Preset: generic.Name},
	}, {
		name: "a GitLab build pod records its real creator over the one it claims",
		cfg:  noVitals, facts: Facts{Requester: requester},
		pod: podtest.GitLab("ci", "p").Annotate(runnerpod.CreatedBy, "system:serviceaccount:ci:someone-else").Obj(),
		want: marked(podtest.GitLab("ci", "p"), gitlab.Name).Annotate(runnerpod.CreatedBy, requester).Annotate(runnerpod.CreatedFrom, "").
			TerminationMessage("build", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: gitlab.Name},
	}, {
		name: "a GitLab build pod records the credential it was created with, over the one it claims",
		cfg:  noVitals, facts: Facts{Requester: requester, Credential: "JTI=manager"},
		pod: podtest.GitLab("ci", "p").Annotate(runnerpod.CreatedWith, "JTI=forged").Obj(),
		want: marked(podtest.GitLab("ci", "p"), gitlab.Name).Annotate(runnerpod.CreatedBy, requester).Annotate(runnerpod.CreatedFrom, "").Annotate(runnerpod.CreatedWith, "JTI=manager").
			TerminationMessage("build", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: gitlab.Name},
	}, {
		name: "a GitLab build pod created with no credential id keeps none it claims",
		cfg:  noVitals, facts: Facts{Requester: requester},
		pod: podtest.GitLab("ci", "p").Annotate(runnerpod.CreatedWith, "JTI=forged").Obj(),
		want: marked(podtest.GitLab("ci", "p"), gitlab.Name).Annotate(runnerpod.CreatedBy, requester).Annotate(runnerpod.CreatedFrom, "").
			TerminationMessage("build", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: gitlab.Name},
	}, {
		name: "a runner whose owner does not end the job by deleting it gets no creator",
		cfg:  noVitals, facts: Facts{Requester: requester},
		pod: podtest.ARCLegacy("ci", "p").Obj(),
		want: marked(podtest.ARCLegacy("ci", "p"), arclegacy.Name).
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: arclegacy.Name},
	}, {
		name: "a namespace whose Pod Security level forbids hostPath gets everything but the sidecar",
		cfg:  def, facts: restricted,
		pod: podtest.Runner("ci", "p").Obj(),
		want: marked(podtest.Runner("ci", "p"), generic.Name).
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{"runnerguard: vitals sidecar not injected: " + restricted.HostMountRefused}},
	}, {
		name: "a Windows pod gets no sidecar and a warning",
		cfg:  def, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").OS(corev1.Windows).Obj(),
		want: marked(podtest.Runner("ci", "p").OS(corev1.Windows), generic.Name).
			Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath).Obj(),
		out: Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{"runnerguard: vitals sidecar not injected: the pod runs on Windows, which has no cgroup filesystem to read; nothing to change: the runner is guarded and its deaths recorded without vitals"}},
	}, {
		name: "a regular container with the sidecar's name keeps the sidecar out",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  podtest.Runner("ci", "p").Container(ContainerName).Obj(),
		want: notInjected(podtest.Runner("ci", "p").Container(ContainerName)),
		out:  Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{clashWarning}},
	}, {
		name: "an init container with the sidecar's name running another image gets no host mount",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  forged(func(c *corev1.Container) { c.Image = "example.com/miner:1" }).Obj(),
		want: notInjected(forged(func(c *corev1.Container) { c.Image = "example.com/miner:1" })),
		out:  Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{clashWarning}},
	}, {
		name: "an exact copy of the sidecar but for a writable cgroup mount gets no host mount",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  forged(func(c *corev1.Container) { c.VolumeMounts[0].ReadOnly = false }).Obj(),
		want: notInjected(forged(func(c *corev1.Container) { c.VolumeMounts[0].ReadOnly = false })),
		out:  Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{clashWarning}},
	}, {
		name: "an exact copy of the sidecar running as root gets no host mount",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  forged(func(c *corev1.Container) { c.SecurityContext.RunAsUser = ptr.To[int64](0) }).Obj(),
		want: notInjected(forged(func(c *corev1.Container) { c.SecurityContext.RunAsUser = ptr.To[int64](0) })),
		out:  Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{clashWarning}},
	}, {
		name: "a container of the pod's own that mounts the cgroup volume by name keeps the sidecar out",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  podtest.Runner("ci", "p").Container("cache").Mount("cache", CgroupVolume, "/host").Obj(),
		want: notInjected(podtest.Runner("ci", "p").Container("cache").Mount("cache", CgroupVolume, "/host")),
		out: Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{
			`runnerguard: vitals sidecar not injected: container "cache" mounts a volume named "runnerguard-cgroup", which would be the node's cgroup filesystem; rename that volume (the names runnerguard-cgroup and runnerguard-vitals are runnerguard's)`,
		}},
	}, {
		name: "the sidecar the injector added, back on a reinvocation with the API token mount, is left as it is",
		cfg:  def, facts: restricted,
		pod:  withToken(instrumented()).Obj(),
		want: withToken(instrumented()).Obj(),
		out:  Outcome{Result: Injected, Preset: generic.Name},
	}, {
		name: "an exact copy of the sidecar is the sidecar: only its volumes are added",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  forged(func(*corev1.Container) {}).Obj(),
		want: instrumented().Obj(),
		out:  Outcome{Result: Injected, Preset: generic.Name},
	}, {
		name: "an exact copy of the sidecar without its volume in a restricted namespace gets no host volume",
		cfg:  def, facts: restricted,
		pod:  forged(func(*corev1.Container) {}).Obj(),
		want: notInjected(forged(func(*corev1.Container) {})),
		out:  Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{"runnerguard: vitals sidecar not injected: " + restricted.HostMountRefused}},
	}, {
		name: "a copy of the sidecar with a cgroup volume of the pod's own keeps the volume and gets nothing",
		cfg:  def, facts: Facts{Requester: requester},
		pod: func() *corev1.Pod {
			w := forged(func(*corev1.Container) {})
			w.Spec.Volumes = []corev1.Volume{{Name: CgroupVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			return w.Obj()
		}(),
		want: func() *corev1.Pod {
			w := forged(func(*corev1.Container) {})
			w.Spec.Volumes = []corev1.Volume{{Name: CgroupVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
			return notInjected(w)
		}(),
		out: Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{`runnerguard: vitals sidecar not injected: the pod has a volume of its own named "runnerguard-cgroup"; rename it (the names runnerguard-cgroup and runnerguard-vitals are runnerguard's)`}},
	}, {
		name: "a runner that already mounts something at the vitals path keeps it and is warned about",
		cfg:  def, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").Mount("runner", "mine", def.Inject.Vitals.MountPath).Obj(),
		want: func() *corev1.Pod {
			w := marked(podtest.Runner("ci", "p").Mount("runner", "mine", def.Inject.Vitals.MountPath), generic.Name).
				Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath)
			w.Spec.InitContainers = []corev1.Container{Sidecar(def.Inject.Vitals)}
			w.Spec.InitContainers[0].Resources = corev1.ResourceRequirements{}
			w.Spec.Volumes = append(w.Spec.Volumes, Volumes(def.Inject.Vitals)...)
			return w.Obj()
		}(),
		out: Outcome{Result: Injected, Preset: generic.Name, Warnings: []string{`runnerguard: container "runner" already mounts a volume at /runnerguard/vitals; the vitals files are not mounted there; move that mount, or set the chart's inject.vitals.mountPath to a path the runner does not use`}},
	}, {
		name: "with pod-level resources the sidecar's requests count in the pod's budget",
		cfg:  def, facts: Facts{Requester: requester},
		pod: podtest.Runner("ci", "p").PodResources(podRequests).Obj(),
		want: func() *corev1.Pod {
			w := withVitals(marked(podtest.Runner("ci", "p").PodResources(podRequests), generic.Name), def.Inject.Vitals, "runner").
				Env("runner", printToOut, "1").TerminationMessage("runner", fallback, termPath)
			w.Spec.InitContainers[0].Resources = def.Inject.Vitals.Resources // the pod-level requests alone make it Burstable
			return w.Obj()
		}(),
		out: Outcome{Result: Injected, Preset: generic.Name},
	}, {
		name: "a sidecar that does not fit within the pod-level resources is left out",
		cfg:  def, facts: Facts{Requester: requester},
		pod:  podtest.Runner("ci", "p").PodResources(tightRequests).Resources("runner", tightRequests, nil).Obj(),
		want: notInjected(podtest.Runner("ci", "p").PodResources(tightRequests).Resources("runner", tightRequests, nil)),
		out: Outcome{Result: NoSidecar, Preset: generic.Name, Warnings: []string{
			"runnerguard: vitals sidecar not injected: it does not fit within the pod-level resources: cpu requests would total 1005m, above the pod's 1; memory requests would total 144Mi, above the pod's 128Mi; raise the pod's spec.resources by the sidecar's (the chart's inject.vitals.resources), or lower those",
		}},
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
		def    string
		refuse string
	}{
		{name: "a namespace without Pod Security labels allows the host mount", labels: nil},
		{name: "the privileged level allows the host mount", labels: map[string]string{psaEnforceLabel: "privileged"}},
		{name: "the baseline level refuses it", labels: map[string]string{psaEnforceLabel: "baseline"}, refuse: `namespace "ci" enforces Pod Security level "baseline"`},
		{name: "the restricted level refuses it", labels: map[string]string{psaEnforceLabel: "restricted"}, refuse: `namespace "ci" enforces Pod Security level "restricted"`},
		{name: "a level that is only warned or audited allows it", labels: map[string]string{"pod-security.kubernetes.io/warn": "restricted", "pod-security.kubernetes.io/audit": "restricted"}},
		{name: "a level Pod Security cannot parse is enforced as restricted", labels: map[string]string{psaEnforceLabel: "Baseline"}, refuse: `sets pod-security.kubernetes.io/enforce="Baseline", which Pod Security enforces as "restricted"`},
		{name: "an unlabelled namespace takes a baseline cluster default", def: "baseline", refuse: `namespace "ci" has no pod-security.kubernetes.io/enforce label and the cluster's default Pod Security level is "baseline"`},
		{name: "an unlabelled namespace takes a restricted cluster default", labels: map[string]string{"team": "ci"}, def: "restricted", refuse: `the cluster's default Pod Security level is "restricted"`},
		{name: "a privileged cluster default allows it", def: "privileged"},
		{name: "the namespace's label wins over the cluster default", labels: map[string]string{psaEnforceLabel: "privileged"}, def: "restricted"},
		{name: "a namespace stricter than the cluster default refuses it", labels: map[string]string{psaEnforceLabel: "baseline"}, def: "privileged", refuse: `enforces Pod Security level "baseline"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := HostMountRefusal("ci", tc.labels, tc.def)
			if tc.refuse == "" {
				assert.Empty(t, got)
				return
			}
			assert.Contains(t, got, tc.refuse)
			assert.Contains(t, got, "forbids the hostPath volume")
		})
	}
}
