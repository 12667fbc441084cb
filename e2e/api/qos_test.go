//go:build e2e

package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/e2e/internal/apitest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

// The QoS class the API server writes into status.qosClass at creation is
// the same for a runner pod instrumented and not. Before 1.34 the server
// drops a pod-level budget, and the class is the containers' alone: the
// injector must size its sidecar for that pod, not for the one sent.
func TestInstrumentingKeepsTheQoSClass(t *testing.T) {
	budgetClass := corev1.PodQOSGuaranteed
	if kept, version := apitest.ServerHas(t, cs.Discovery(), apitest.PodLevelResources); !kept {
		t.Logf("kube-apiserver %s drops pod-level resources: that pod is BestEffort as stored", version)
		budgetClass = corev1.PodQOSBestEffort
	}
	served, unserved := newNamespace(t, nil), plainNamespace(t, nil)
	res := func(cpu, memory string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)}
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want corev1.PodQOSClass
	}{
		{"Guaranteed", podtest.Runner("", "guaranteed").Resources("runner", res("1", "128Mi"), res("1", "128Mi")).Obj(), corev1.PodQOSGuaranteed},
		{"Guaranteed by limits alone", podtest.Runner("", "limits").Resources("runner", nil, res("1", "128Mi")).Obj(), corev1.PodQOSGuaranteed},
		{"Burstable", podtest.Runner("", "burstable").Resources("runner", res("500m", "64Mi"), res("1", "128Mi")).Obj(), corev1.PodQOSBurstable},
		{"BestEffort", podtest.Runner("", "besteffort").Obj(), corev1.PodQOSBestEffort},
		{"a pod-level budget", podtest.Runner("", "pod-level").PodLimits(res("2", "1Gi"), res("2", "1Gi")).Obj(), budgetClass},
	}
	c, _ := warningsAs(t, goldenRequester)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			plain, err := asStored(t, admin, unserved, tc.pod)
			require.NoError(t, err)
			got, err := asStored(t, c, served, tc.pod)
			require.NoError(t, err)
			require.Equal(t, inject.ContainerName, got.Spec.InitContainers[0].Name, "instrumented")
			assert.Equal(t, tc.want, plain.Status.QOSClass)
			assert.Equal(t, plain.Status.QOSClass, got.Status.QOSClass)
		})
	}
}

// A pod whose own containers name the sidecar or mount its cgroup volume
// never gets the node's cgroup filesystem: the injector adds no volume, so
// a mount of an undefined volume is refused by the API server as it would
// be without runnerguard, and a valid such pod is admitted untouched.
func TestAPodsOwnContainersNeverGetTheHostMount(t *testing.T) {
	ns := newNamespace(t, nil)
	c, warnings := warningsAs(t, goldenRequester)
	mine := corev1.Container{Name: inject.ContainerName, Image: "example.com/miner:1",
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		VolumeMounts:  []corev1.VolumeMount{{Name: inject.CgroupVolume, MountPath: "/host"}}}

	named := podtest.Runner("", "named").Obj()
	named.Spec.InitContainers = []corev1.Container{mine}
	mounting := podtest.Runner("", "mounting").Obj()
	mounting.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: inject.CgroupVolume, MountPath: "/host"}}
	for _, pod := range []*corev1.Pod{named, mounting} {
		_, err := asStored(t, c, ns, pod)
		require.Error(t, err, "%s: admitted with a volume the pod does not define", pod.Name)
		assert.True(t, apierrors.IsInvalid(err), "%s: %v", pod.Name, err)
		assert.Contains(t, err.Error(), `volumeMounts[0].name: Not found: "runnerguard-cgroup"`)
	}

	// The same container without the mount is the author's business.
	mine.VolumeMounts = nil
	valid := podtest.Runner("", "valid").Obj()
	valid.Spec.InitContainers = []corev1.Container{mine}
	*warnings = nil
	got, err := asStored(t, c, ns, valid)
	require.NoError(t, err)
	assert.Empty(t, got.Spec.Volumes)
	require.Len(t, got.Spec.InitContainers, 1)
	assert.Equal(t, "example.com/miner:1", got.Spec.InitContainers[0].Image)
	assert.Empty(t, got.Spec.InitContainers[0].VolumeMounts)
	assert.Equal(t, []string{`runnerguard: vitals sidecar not injected: the pod has a container named "runnerguard-vitals" that is not the sidecar runnerguard builds (the pod's own, or one copied under another runnerguard version or configuration); the node's cgroup filesystem is mounted only into runnerguard's own sidecar; rename the pod's own container, or create the pod from its template rather than from a copy of an instrumented pod`}, *warnings)
}
