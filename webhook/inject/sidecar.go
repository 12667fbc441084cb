package inject

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/webhook/config"
)

// Names of the sidecar contract: the vitals binary, the chart and the
// guard's death record rely on them.
const (
	// ContainerName is the vitals sidecar's container name.
	ContainerName = "runnerguard-vitals"
	// CgroupVolume is the hostPath volume of the node's cgroup filesystem.
	CgroupVolume = "runnerguard-cgroup"
	// CgroupMountPath is where the sidecar finds it, read-only; its
	// --cgroup-root flag says the same.
	CgroupMountPath = "/host/cgroup"
	// VitalsVolume is the emptyDir the sidecar writes its files to and the
	// runner containers read at config.Vitals.MountPath.
	VitalsVolume = "runnerguard-vitals"
	// SharedMountPath is where the sidecar itself mounts VitalsVolume. It is
	// not config.Vitals.MountPath: the sidecar runs the runnerguard image,
	// whose root holds the files /runnerguard and /vitals, and the runtime
	// cannot mount a volume below a file (the default /runnerguard/vitals
	// failed on a real node with "not a directory").
	SharedMountPath = "/run/runnerguard/vitals"
	// UID is the user (and group) the sidecar runs as: distroless "nonroot".
	UID int64 = 65532
)

// vitalsSizeLimit bounds the emptyDir: the sidecar keeps three small files
// there (memory.events, memory.peak, vitals.json).
var vitalsSizeLimit = resource.MustParse("1Mi")

// Sidecar returns the vitals sidecar container for v.
func Sidecar(v config.Vitals) corev1.Container {
	return corev1.Container{
		Name:            ContainerName,
		Image:           v.Image,
		ImagePullPolicy: v.ImagePullPolicy,
		Command:         []string{"/vitals"},
		Args: []string{
			"--cgroup-root=" + CgroupMountPath,
			"--interval=" + v.Interval.Duration.String(),
			"--out-dir=" + SharedMountPath,
		},
		// The pod UID finds the pod's cgroup; at CREATE the pod has no UID
		// yet, so it can only come from the downward API at run time.
		Env: []corev1.EnvVar{
			fieldEnv("POD_UID", "metadata.uid"),
			fieldEnv("POD_NAME", "metadata.name"),
			fieldEnv("POD_NAMESPACE", "metadata.namespace"),
			fieldEnv("NODE_NAME", "spec.nodeName"),
		},
		Resources: *v.Resources.DeepCopy(),
		// A native sidecar: an init container that keeps running. It starts
		// before the other init containers, so it watches from the start; it
		// never keeps an ephemeral runner pod alive and is stopped after the
		// runner ends, which gives it the last word in its termination
		// message.
		RestartPolicy:            ptr.To(corev1.ContainerRestartPolicyAlways),
		TerminationMessagePath:   corev1.TerminationMessagePathDefault,
		TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		VolumeMounts: []corev1.VolumeMount{
			{Name: CgroupVolume, MountPath: CgroupMountPath, ReadOnly: true},
			{Name: VitalsVolume, MountPath: SharedMountPath},
		},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			RunAsUser:                ptr.To(UID),
			RunAsGroup:               ptr.To(UID),
			ReadOnlyRootFilesystem:   ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
	}
}

// fieldEnv is a downward-API variable. The API version is written out
// because the API server would default it, and a value that differs from
// what the server stores would make a second pass look like a change.
func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: path},
	}}
}

// Volumes returns the sidecar's volumes for v.
func Volumes(v config.Vitals) []corev1.Volume {
	return []corev1.Volume{
		{Name: CgroupVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
			Path: v.CgroupHostPath, Type: ptr.To(corev1.HostPathDirectory),
		}}},
		{Name: VitalsVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
			SizeLimit: ptr.To(vitalsSizeLimit.DeepCopy()),
		}}},
	}
}

// sidecarRefusal says why the sidecar cannot be added to pod, or "".
func sidecarRefusal(pod *corev1.Pod, facts Facts) string {
	if slices.ContainsFunc(pod.Spec.InitContainers, named(ContainerName)) {
		return "" // already there: nothing is added that could be refused
	}
	clash := slices.ContainsFunc(pod.Spec.Containers, named(ContainerName)) ||
		slices.ContainsFunc(pod.Spec.EphemeralContainers, func(c corev1.EphemeralContainer) bool { return c.Name == ContainerName })
	switch {
	case facts.HostMountRefused != "":
		return facts.HostMountRefused
	case pod.Spec.OS != nil && pod.Spec.OS.Name == corev1.Windows:
		// Besides having no cgroups, a Windows pod may not carry the
		// sidecar's Linux security settings: the pod would be refused.
		return "the pod runs on Windows, which has no cgroup filesystem to read"
	case clash:
		return fmt.Sprintf("the pod already has a container named %q", ContainerName)
	}
	return ""
}

// addVitals adds the sidecar first in initContainers, its volumes, and the
// read-only vitals mount of each runner container, each only where absent.
// It returns warnings for runner containers that could not get the mount.
func addVitals(pod *corev1.Pod, runners []string, v config.Vitals) []string {
	if !slices.ContainsFunc(pod.Spec.InitContainers, named(ContainerName)) {
		sc := Sidecar(v)
		if pod.Spec.Resources != nil {
			// With pod-level resources, the containers' requests must fit
			// the pod's; the sidecar then shares the pod's budget rather
			// than push the pod over it and have it refused.
			sc.Resources = corev1.ResourceRequirements{}
		}
		pod.Spec.InitContainers = slices.Insert(pod.Spec.InitContainers, 0, sc)
	}
	for _, vol := range Volumes(v) {
		if !slices.ContainsFunc(pod.Spec.Volumes, func(have corev1.Volume) bool { return have.Name == vol.Name }) {
			pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		}
	}
	var warnings []string
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !slices.Contains(runners, c.Name) || slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == VitalsVolume }) {
			continue
		}
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == v.MountPath }) {
			warnings = append(warnings, fmt.Sprintf("runnerguard: container %q already mounts a volume at %s; the vitals files are not mounted there", c.Name, v.MountPath))
			continue
		}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: VitalsVolume, MountPath: v.MountPath, ReadOnly: true})
	}
	return warnings
}

func named(name string) func(corev1.Container) bool {
	return func(c corev1.Container) bool { return c.Name == name }
}
