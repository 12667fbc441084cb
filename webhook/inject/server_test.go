package inject

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/version"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

func TestPodResourcesDropped(t *testing.T) {
	cases := []struct {
		gitVersion string
		want       bool
	}{
		{"v1.30.14", true},
		{"v1.33.13", true},
		{"v1.33.5-eks-1234abc", true},
		{"v1.34.0", false},
		{"v1.34.2-gke.1000", false},
		{"v1.37.2", false},
		{"v2.0.0", false},
	}
	for _, tc := range cases {
		t.Run(tc.gitVersion, func(t *testing.T) {
			got, err := PodResourcesDropped(&version.Info{GitVersion: tc.gitVersion})
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, bad := range []string{"", "master", "latest"} {
		_, err := PodResourcesDropped(&version.Info{GitVersion: bad})
		assert.Error(t, err, "%q", bad)
	}
}

// Where the API server drops spec.resources, the sidecar is sized and
// fitted by the containers alone, as the server will keep the pod; where it
// keeps them, by the pod-level budget. Either way the pod's own
// spec.resources go back as the author wrote them.
func TestMutateSizesTheSidecarForWhatTheServerKeeps(t *testing.T) {
	cfg := configtest.Enforcing()
	configured := cfg.Inject.Vitals.Resources
	guaranteedBudget := func() *corev1.Pod {
		return podtest.Runner("ci", "p").PodLimits(list("2", "1Gi"), list("2", "1Gi")).Obj()
	}
	tightBudget := func() *corev1.Pod {
		tight := list("1", "128Mi")
		return podtest.Runner("ci", "p").PodResources(tight).Resources("runner", tight, nil).Obj()
	}
	cases := []struct {
		name    string
		pod     func() *corev1.Pod
		dropped bool
		sidecar *corev1.ResourceRequirements // nil: no sidecar
	}{
		{name: "kept: a pod Guaranteed by its budget gets a Guaranteed sidecar", pod: guaranteedBudget,
			sidecar: &corev1.ResourceRequirements{Requests: list("50m", "32Mi"), Limits: list("50m", "32Mi")}},
		{name: "dropped: the same pod is BestEffort as stored, and so is its sidecar", pod: guaranteedBudget, dropped: true,
			sidecar: &corev1.ResourceRequirements{}},
		{name: "kept: a sidecar over the budget is left out", pod: tightBudget},
		{name: "dropped: no budget to exceed, the configured resources", pod: tightBudget, dropped: true,
			sidecar: &configured},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.pod()
			authored := pod.Spec.Resources.DeepCopy()
			out := Mutate(pod, Facts{Requester: requester, PodResourcesDropped: tc.dropped}, cfg)
			assert.Equal(t, authored, pod.Spec.Resources, "the pod's own budget is left to the server")
			if tc.sidecar == nil {
				assert.Equal(t, NoSidecar, out.Result)
				require.Len(t, out.Warnings, 1)
				assert.Contains(t, out.Warnings[0], "it does not fit within the pod-level resources")
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
