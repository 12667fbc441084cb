package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/vitals/record"
)

// Names of the sidecar contract: the vitals binary, the chart and the
// guard's death record rely on them.
const (
	// ContainerName is the vitals sidecar's container name.
	ContainerName = runnerpod.VitalsContainer
	// CgroupVolume is the hostPath volume of the node's cgroup filesystem.
	CgroupVolume = runnerpod.CgroupVolume
	// CgroupMountPath is where the sidecar finds it, read-only unless
	// config.Vitals.OOMNotify; its --cgroup-root flag says the same.
	CgroupMountPath = "/host/cgroup"
	// VitalsVolume is the emptyDir the sidecar writes its files to and the
	// runner containers read at config.Vitals.MountPath.
	VitalsVolume = runnerpod.VitalsVolume
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
	c := corev1.Container{
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
	if v.OOMNotify {
		withOOMNotify(&c)
	}
	if v.ProbePort != 0 {
		withProbe(&c, v.ProbePort)
	}
	return c
}

// withProbe serves the sidecar's readiness probe on port. The kubelet
// asks and writes the answer into the pod's status, which the leader's pod
// watch already reads: a live stall signal with no write from the pod and
// no log to follow.
func withProbe(c *corev1.Container, port int32) {
	c.Args = append(c.Args, fmt.Sprintf("--probe-addr=:%d", port))
	c.ReadinessProbe = &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: record.ProbePath, Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP,
		}},
		// The first ask waits a period: the sidecar listens a moment
		// after it starts, and every failed ask is a Warning Event
		// (Unhealthy) that would bury the refusals operators look for
		// among the Warnings. No stall can be judged sooner anyway.
		InitialDelaySeconds: 5,
		// Written out as the API server would default them, so a second
		// pass sees no change.
		TimeoutSeconds: 2, PeriodSeconds: 5, SuccessThreshold: 1, FailureThreshold: 1,
	}
}

// withOOMNotify gives the sidecar what registering the kernel's OOM
// notification on cgroup v1 takes: a write to each container cgroup's
// cgroup.event_control, a file only its owner, root, may write. So the
// cgroup mount is writable and the user is root; the owner's right needs
// no capability, and every one stays dropped.
func withOOMNotify(c *corev1.Container) {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == CgroupVolume {
			c.VolumeMounts[i].ReadOnly = false
		}
	}
	sc := c.SecurityContext
	sc.RunAsNonRoot, sc.RunAsUser, sc.RunAsGroup = ptr.To(false), ptr.To(int64(0)), ptr.To(int64(0))
}

// withoutProbe is c without the readiness probe: the sidecar of a pod on
// the host's network, where a fixed port would clash between pods.
func withoutProbe(c corev1.Container) corev1.Container {
	c.ReadinessProbe = nil
	c.Args = slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool { return strings.HasPrefix(a, "--probe-addr=") })
	return c
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

// newSidecar is the sidecar to add to pod, or nil when the injector's own
// is already there, or the reason none can be added: its resources keep
// the pod's QoS class and fit within its pod-level resources.
func newSidecar(pod *corev1.Pod, v config.Vitals) (*corev1.Container, string) {
	if slices.ContainsFunc(pod.Spec.InitContainers, named(ContainerName)) {
		return nil, "" // sidecarRefusal found it to be the injector's own
	}
	sc := Sidecar(v)
	if pod.Spec.HostNetwork {
		sc = withoutProbe(sc)
	}
	res, reason := sidecarResources(podQOS(pod), v.Resources)
	if reason != "" {
		return nil, reason
	}
	sc.Resources = res
	if reason := podLevelMisfit(pod, sc); reason != "" {
		return nil, reason
	}
	return &sc, ""
}

// addVitals adds sc (unless nil) first in initContainers, the sidecar's
// volumes, and the read-only vitals mount of each runner container, each
// only where absent. It returns warnings for runner containers that could
// not get the mount.
func addVitals(p *patch, pod *corev1.Pod, sc *corev1.Container, runners []string, v config.Vitals) []string {
	if sc != nil {
		insertFirst(p, &pod.Spec.InitContainers, "/spec/initContainers", *sc)
	}
	for _, vol := range Volumes(v) {
		if !slices.ContainsFunc(pod.Spec.Volumes, func(have corev1.Volume) bool { return have.Name == vol.Name }) {
			appendItem(p, &pod.Spec.Volumes, "/spec/volumes", vol)
		}
	}
	var warnings []string
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if !slices.Contains(runners, c.Name) || slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == VitalsVolume }) {
			continue
		}
		if slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == v.MountPath }) {
			warnings = append(warnings, fmt.Sprintf("runnerguard: container %q already mounts a volume at %s; the vitals files are not mounted there; move that mount, or set the chart's inject.vitals.mountPath to a path the runner does not use", c.Name, v.MountPath))
			continue
		}
		appendItem(p, &c.VolumeMounts, containerPath(i)+"/volumeMounts", corev1.VolumeMount{Name: VitalsVolume, MountPath: v.MountPath, ReadOnly: true})
	}
	return warnings
}

func named(name string) func(corev1.Container) bool {
	return func(c corev1.Container) bool { return c.Name == name }
}
