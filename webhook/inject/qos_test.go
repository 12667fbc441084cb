package inject

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

func list(cpu, memory string) corev1.ResourceList {
	l := corev1.ResourceList{}
	if cpu != "" {
		l[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		l[corev1.ResourceMemory] = resource.MustParse(memory)
	}
	return l
}

// The rows follow upstream's TestComputePodQOS
// (k8s.io/kubernetes/pkg/apis/core/v1/helper/qos/qos_test.go).
func TestPodQOS(t *testing.T) {
	g := list("1", "128Mi")
	cases := []struct {
		name string
		pod  *podtest.Wrapper
		want corev1.PodQOSClass
	}{
		{"no resources anywhere", podtest.Runner("ci", "p").Container("b"), corev1.PodQOSBestEffort},
		{"requests equal limits in every container", podtest.Runner("ci", "p").Container("b").Resources("runner", g, g).Resources("b", list("2", "1Gi"), list("2", "1Gi")), corev1.PodQOSGuaranteed},
		{"equal but only cpu", podtest.Runner("ci", "p").Resources("runner", list("1", ""), list("1", "")), corev1.PodQOSBurstable},
		{"requests below limits", podtest.Runner("ci", "p").Resources("runner", list("500m", "128Mi"), g), corev1.PodQOSBurstable},
		{"limits only, as a client sends it before defaulting", podtest.Runner("ci", "p").Resources("runner", nil, g), corev1.PodQOSBurstable},
		{"one Guaranteed, one BestEffort container", podtest.Runner("ci", "p").Container("b").Resources("runner", g, g), corev1.PodQOSBurstable},
		{"an init container counts", podtest.Runner("ci", "p").Resources("runner", g, g).InitContainer("poller"), corev1.PodQOSBurstable},
		{"a Guaranteed init container of a Guaranteed pod", podtest.Runner("ci", "p").Resources("runner", g, g).InitContainer("poller").Resources("poller", g, g), corev1.PodQOSGuaranteed},
		{"only an extended resource", podtest.Runner("ci", "p").Resources("runner", corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}, corev1.ResourceList{"example.com/gpu": resource.MustParse("1")}), corev1.PodQOSBestEffort},
		{"pod-level requests equal limits decide over the containers", podtest.Runner("ci", "p").PodLimits(g, g), corev1.PodQOSGuaranteed},
		{"pod-level requests below limits", podtest.Runner("ci", "p").Resources("runner", g, g).PodLimits(list("1", "64Mi"), g), corev1.PodQOSBurstable},
		{"pod-level hugepages only count as set but are not cpu or memory", podtest.Runner("ci", "p").PodLimits(corev1.ResourceList{"hugepages-2Mi": resource.MustParse("2Mi")}, corev1.ResourceList{"hugepages-2Mi": resource.MustParse("2Mi")}), corev1.PodQOSBestEffort},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, podQOS(tc.pod.Obj()))
		})
	}
}

// Instrumenting a pod never changes its QoS class, and the sidecar's
// resources are as documented for each class.
func TestMutateKeepsTheQoSClass(t *testing.T) {
	cfg := configtest.Enforcing()
	configured := cfg.Inject.Vitals.Resources
	g := list("1", "128Mi")
	limitsOnly := configtest.Enforcing()
	limitsOnly.Inject.Vitals.Resources = corev1.ResourceRequirements{Requests: list("5m", "16Mi"), Limits: list("", "32Mi")}
	noMemory := configtest.Enforcing()
	noMemory.Inject.Vitals.Resources = corev1.ResourceRequirements{Requests: list("5m", ""), Limits: list("50m", "")}

	cases := []struct {
		name    string
		cfg     config.Config
		pod     *podtest.Wrapper
		class   corev1.PodQOSClass
		sidecar *corev1.ResourceRequirements // nil: no sidecar
		warning string
	}{
		{name: "BestEffort: a sidecar without resources", cfg: cfg,
			pod: podtest.Runner("ci", "p"), class: corev1.PodQOSBestEffort, sidecar: &corev1.ResourceRequirements{}},
		{name: "Burstable: the configured resources", cfg: cfg,
			pod: podtest.Runner("ci", "p").Resources("runner", list("500m", "64Mi"), g), class: corev1.PodQOSBurstable, sidecar: &configured},
		{name: "Guaranteed: requests equal to the configured limits", cfg: cfg,
			pod: podtest.Runner("ci", "p").Resources("runner", g, g), class: corev1.PodQOSGuaranteed,
			sidecar: &corev1.ResourceRequirements{Requests: list("50m", "32Mi"), Limits: list("50m", "32Mi")}},
		{name: "Guaranteed with a config without a cpu limit: the cpu request as both", cfg: limitsOnly,
			pod: podtest.Runner("ci", "p").Resources("runner", g, g), class: corev1.PodQOSGuaranteed,
			sidecar: &corev1.ResourceRequirements{Requests: list("5m", "32Mi"), Limits: list("5m", "32Mi")}},
		{name: "Guaranteed with a config that sets no memory: no sidecar", cfg: noMemory,
			pod: podtest.Runner("ci", "p").Resources("runner", g, g), class: corev1.PodQOSGuaranteed,
			warning: "the pod is Guaranteed and the sidecar's configured resources set no memory, so it would make the pod Burstable; set inject.vitals.resources.limits.memory in the chart's values"},
		{name: "Guaranteed by pod-level resources with room: requests equal limits, counted in the pod's", cfg: cfg,
			pod: podtest.Runner("ci", "p").Resources("runner", list("1", "512Mi"), nil).PodLimits(list("2", "1Gi"), list("2", "1Gi")), class: corev1.PodQOSGuaranteed,
			sidecar: &corev1.ResourceRequirements{Requests: list("50m", "32Mi"), Limits: list("50m", "32Mi")}},
		{name: "Guaranteed by pod-level resources its runner takes whole: no sidecar", cfg: cfg,
			pod: podtest.Runner("ci", "p").Resources("runner", list("2", "1Gi"), nil).PodLimits(list("2", "1Gi"), list("2", "1Gi")), class: corev1.PodQOSGuaranteed,
			warning: "it does not fit within the pod-level resources: cpu requests would total 2050m, above the pod's 2; memory requests would total 1056Mi, above the pod's 1Gi; raise the pod's spec.resources by the sidecar's (the chart's inject.vitals.resources), or lower those"},
		{name: "a sidecar limit above the pod-level limit: no sidecar", cfg: cfg,
			pod: podtest.Runner("ci", "p").PodLimits(list("1", "1Gi"), list("1", "16Mi")), class: corev1.PodQOSBurstable,
			warning: "it does not fit within the pod-level resources: its memory limit 32Mi is above the pod's 16Mi; raise the pod's spec.resources by the sidecar's (the chart's inject.vitals.resources), or lower those"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod.Obj()
			require.Equal(t, tc.class, podQOS(pod), "the case's premise")
			out := Mutate(pod, Facts{Requester: requester}, tc.cfg)
			assert.Equal(t, tc.class, podQOS(pod), "the class after injection")
			if tc.sidecar == nil {
				assert.Equal(t, NoSidecar, out.Result)
				assert.Equal(t, []string{"runnerguard: vitals sidecar not injected: " + tc.warning}, out.Warnings)
				assert.False(t, slices.ContainsFunc(pod.Spec.InitContainers, named(ContainerName)))
				return
			}
			assert.Equal(t, Injected, out.Result)
			assert.Empty(t, out.Warnings)
			require.Equal(t, ContainerName, pod.Spec.InitContainers[0].Name)
			assert.Equal(t, *tc.sidecar, pod.Spec.InitContainers[0].Resources)
		})
	}
}
