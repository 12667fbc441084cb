package podtest

import (
	corev1 "k8s.io/api/core/v1"
)

// spec returns container name among the containers and init containers,
// or panics: a test that names a container its pod lacks is wrong.
func (w *Wrapper) spec(name string) *corev1.Container {
	for _, list := range [][]corev1.Container{w.Spec.Containers, w.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	panic("podtest: no container " + name)
}

// Env sets the env var name to value on container c.
func (w *Wrapper) Env(c, name, value string) *Wrapper {
	ctr := w.spec(c)
	ctr.Env = append(ctr.Env, corev1.EnvVar{Name: name, Value: value})
	return w
}

// TerminationMessage sets container c's termination message policy and
// path.
func (w *Wrapper) TerminationMessage(c string, p corev1.TerminationMessagePolicy, path string) *Wrapper {
	ctr := w.spec(c)
	ctr.TerminationMessagePolicy, ctr.TerminationMessagePath = p, path
	return w
}

// Mount mounts volume vol at path in container c, adding an emptyDir
// volume of that name if the pod has none.
func (w *Wrapper) Mount(c, vol, path string) *Wrapper {
	ctr := w.spec(c)
	ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: path})
	for _, v := range w.Spec.Volumes {
		if v.Name == vol {
			return w
		}
	}
	w.Spec.Volumes = append(w.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	return w
}

// Container appends a regular container named name.
func (w *Wrapper) Container(name string) *Wrapper {
	w.Spec.Containers = append(w.Spec.Containers, container(name))
	return w
}

// OS sets the pod's operating system.
func (w *Wrapper) OS(os corev1.OSName) *Wrapper {
	w.Spec.OS = &corev1.PodOS{Name: os}
	return w
}

// PodResources sets pod-level requests (cpu, memory) and no limits.
func (w *Wrapper) PodResources(requests corev1.ResourceList) *Wrapper {
	w.Spec.Resources = &corev1.ResourceRequirements{Requests: requests}
	return w
}

// Resources sets container c's requests and limits.
func (w *Wrapper) Resources(c string, requests, limits corev1.ResourceList) *Wrapper {
	w.spec(c).Resources = corev1.ResourceRequirements{Requests: requests, Limits: limits}
	return w
}

// PodLimits sets pod-level requests and limits.
func (w *Wrapper) PodLimits(requests, limits corev1.ResourceList) *Wrapper {
	w.Spec.Resources = &corev1.ResourceRequirements{Requests: requests, Limits: limits}
	return w
}

// InitContainer appends an init container name.
func (w *Wrapper) InitContainer(name string) *Wrapper {
	w.Spec.InitContainers = append(w.Spec.InitContainers, container(name))
	return w
}
