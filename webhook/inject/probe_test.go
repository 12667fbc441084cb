package inject

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

func sidecarOf(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(pod.Spec.InitContainers, named(ContainerName))
	require.GreaterOrEqual(t, i, 0, "the sidecar is added")
	return pod.Spec.InitContainers[i]
}

func TestTheSidecarsReadinessProbeTellsAStall(t *testing.T) {
	cfg := configtest.Enforcing()
	facts := Facts{Requester: "system:serviceaccount:ci:arc"}

	t.Run("a runner pod's sidecar serves the probe on the configured port and the kubelet asks it", func(t *testing.T) {
		pod := podtest.Runner("ci", "r").Obj()
		Mutate(pod, facts, cfg)
		sc := sidecarOf(t, pod)
		require.NotNil(t, sc.ReadinessProbe)
		assert.Equal(t, "/ready", sc.ReadinessProbe.HTTPGet.Path)
		assert.Equal(t, int32(9798), sc.ReadinessProbe.HTTPGet.Port.IntVal)
		assert.Contains(t, sc.Args, "--probe-addr=:9798")
	})
	t.Run("a pod on the host's network gets no probe, whose port would clash between pods, and a second pass keeps it", func(t *testing.T) {
		pod := podtest.Runner("ci", "r").Obj()
		pod.Spec.HostNetwork = true
		Mutate(pod, facts, cfg)
		sc := sidecarOf(t, pod)
		assert.Nil(t, sc.ReadinessProbe)
		assert.NotContains(t, sc.Args, "--probe-addr=:9798")
		again := pod.DeepCopy()
		Mutate(again, facts, cfg)
		assert.Equal(t, pod, again, "the probe-less sidecar is runnerguard's own")
	})
	t.Run("port 0 turns the probe off", func(t *testing.T) {
		off := configtest.Enforcing()
		off.Inject.Vitals.ProbePort = 0
		pod := podtest.Runner("ci", "r").Obj()
		Mutate(pod, facts, off)
		sc := sidecarOf(t, pod)
		assert.Nil(t, sc.ReadinessProbe)
		assert.False(t, slices.ContainsFunc(sc.Args, func(a string) bool { return a == "--probe-addr=:0" }))
	})
}
