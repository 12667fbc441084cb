package inject

// Whether the sidecar may be added: the host cgroup mount reaches only the
// sidecar the injector builds, so a pod's own container or volume in its
// place keeps it out.

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/runnerguard/runnerguard/internal/config"
)

// serviceAccountTokenPath is where the ServiceAccount admission plugin
// mounts the API token into every container that lacks it. In-tree
// plugins run again when a webhook is reinvoked (k8s.io/apiserver
// admission/reinvocation.go), so the sidecar the injector added can come
// back with that mount.
const serviceAccountTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// ownSidecar reports whether c is the sidecar the injector builds for v, as
// the API server may hand it back on a reinvocation or in a copy of an
// instrumented pod. The whole container is compared, so a container the
// pod author wrote passes only if it runs exactly what runnerguard runs,
// as runnerguard runs it. Only what grants nothing is set aside: the
// resources (they depend on the pod's QoS class, and a LimitRange may fill
// them in) and the API token mount of the ServiceAccount plugin.
func ownSidecar(c corev1.Container, v config.Vitals) bool {
	want, got := Sidecar(v), *c.DeepCopy()
	want.Resources, got.Resources = corev1.ResourceRequirements{}, corev1.ResourceRequirements{}
	got.VolumeMounts = slices.DeleteFunc(got.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.MountPath == serviceAccountTokenPath && m.ReadOnly
	})
	if want.ImagePullPolicy == "" {
		got.ImagePullPolicy = "" // the API server's default, which the config left to it
	}
	return equality.Semantic.DeepEqual(want, got) || equality.Semantic.DeepEqual(withoutProbe(want), got)
}

// sidecarRefusal says why the sidecar cannot be added to pod, or "". The
// host cgroup mount must reach only the sidecar the injector builds: a
// container of the pod's own that bears the sidecar's name or mounts the
// cgroup volume, or a volume of the pod's own under one of the sidecar's
// volume names, keeps the sidecar out, and nothing of the pod is changed.
func sidecarRefusal(pod *corev1.Pod, facts Facts, v config.Vitals) string {
	own := slices.IndexFunc(pod.Spec.InitContainers, named(ContainerName))
	if own >= 0 && !ownSidecar(pod.Spec.InitContainers[own], v) ||
		slices.ContainsFunc(pod.Spec.Containers, named(ContainerName)) ||
		slices.ContainsFunc(pod.Spec.EphemeralContainers, func(c corev1.EphemeralContainer) bool { return c.Name == ContainerName }) {
		return fmt.Sprintf("the pod has a container named %q that is not the sidecar runnerguard builds (the pod's own, or one copied under another runnerguard version or configuration); the node's cgroup filesystem is mounted only into runnerguard's own sidecar; rename the pod's own container, or create the pod from its template rather than from a copy of an instrumented pod", ContainerName)
	}
	for _, c := range otherContainers(pod, own) {
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == CgroupVolume }) {
			return fmt.Sprintf("container %q mounts a volume named %q, which would be the node's cgroup filesystem; rename that volume (the names %s and %s are runnerguard's)", c.Name, CgroupVolume, CgroupVolume, VitalsVolume)
		}
	}
	hasCgroupVolume := false
	for _, want := range Volumes(v) {
		i := slices.IndexFunc(pod.Spec.Volumes, func(have corev1.Volume) bool { return have.Name == want.Name })
		if i < 0 {
			continue
		}
		if !equality.Semantic.DeepEqual(want, pod.Spec.Volumes[i]) {
			return fmt.Sprintf("the pod has a volume of its own named %q; rename it (the names %s and %s are runnerguard's)", want.Name, CgroupVolume, VitalsVolume)
		}
		hasCgroupVolume = hasCgroupVolume || want.Name == CgroupVolume
	}
	switch {
	case own >= 0 && hasCgroupVolume:
		return "" // already there: nothing is added that could be refused
	case facts.HostMountRefused != "":
		return facts.HostMountRefused
	case pod.Spec.OS != nil && pod.Spec.OS.Name == corev1.Windows:
		// Besides having no cgroups, a Windows pod may not carry the
		// sidecar's Linux security settings: the pod would be refused.
		return "the pod runs on Windows, which has no cgroup filesystem to read; nothing to change: the runner is guarded and its deaths recorded without vitals"
	}
	return ""
}

// otherContainers is every container of pod but the init container at
// index own (-1: none).
func otherContainers(pod *corev1.Pod, own int) []corev1.Container {
	var out []corev1.Container
	for i, c := range pod.Spec.InitContainers {
		if i != own {
			out = append(out, c)
		}
	}
	out = append(out, pod.Spec.Containers...)
	for _, e := range pod.Spec.EphemeralContainers {
		out = append(out, corev1.Container{Name: e.Name, VolumeMounts: e.VolumeMounts})
	}
	return out
}
