package inject

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// qosResources are the resources the QoS class is computed from.
var qosResources = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// podQOS is the pod's QoS class as the API server computes it into
// status.qosClass at creation: ComputePodQOS of
// k8s.io/kubernetes/pkg/apis/core/v1/helper/qos (v1.37, with the
// PodLevelResources and PodLevelResourcesFixKubeletQOSClass gates on, their
// defaults), which only k8s.io/kubernetes exports. Pod-level cpu or memory
// decide alone; otherwise every container, init containers included: all
// BestEffort is BestEffort, all Guaranteed is Guaranteed, anything else is
// Burstable. The pod is read as the API server sends it, defaulted
// (a container's missing requests are its limits).
func podQOS(pod *corev1.Pod) corev1.PodQOSClass {
	if resourcehelper.IsPodLevelResourcesSet(pod) {
		return requirementsQOS(pod.Spec.Resources)
	}
	var class corev1.PodQOSClass
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		switch cq := requirementsQOS(&c.Resources); {
		case cq == corev1.PodQOSBurstable:
			return cq
		case class == "":
			class = cq
		case class != cq:
			return corev1.PodQOSBurstable
		}
	}
	if class == "" {
		return corev1.PodQOSBestEffort
	}
	return class
}

// requirementsQOS is upstream's requirementsQOS and resourceQOS in one:
// the class of one set of requirements over cpu and memory.
func requirementsQOS(r *corev1.ResourceRequirements) corev1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return corev1.PodQOSBestEffort
	}
	var class corev1.PodQOSClass
	for _, name := range qosResources {
		req, lim := r.Requests[name], r.Limits[name]
		rq := corev1.PodQOSGuaranteed
		switch {
		case !req.Equal(lim):
			return corev1.PodQOSBurstable
		case req.IsZero():
			rq = corev1.PodQOSBestEffort
		}
		if class != "" && class != rq {
			return corev1.PodQOSBurstable
		}
		class = rq
	}
	return class
}

// kept is pod as the API server will store it, as far as the sidecar's
// resources depend on it: without spec.resources where the server drops
// them. Only the copy loses them: the pod is sent back as its author wrote
// it, and the server decides.
func kept(pod *corev1.Pod, facts Facts) *corev1.Pod {
	if !facts.PodResourcesDropped || pod.Spec.Resources == nil {
		return pod
	}
	without := *pod
	without.Spec.Resources = nil
	return &without
}

// sidecarResources are the sidecar's resources in a pod of class qos, so
// that adding it leaves the class as it was: a Guaranteed pod's sidecar
// requests what it may use (its limits, or its request where the config
// sets no limit), a BestEffort pod's sidecar has no resources, and a
// Burstable pod's has the configured ones. It returns a reason instead
// when cfg cannot keep a Guaranteed pod Guaranteed.
func sidecarResources(qos corev1.PodQOSClass, cfg corev1.ResourceRequirements) (corev1.ResourceRequirements, string) {
	switch qos {
	case corev1.PodQOSBestEffort:
		return corev1.ResourceRequirements{}, ""
	case corev1.PodQOSGuaranteed:
		both := cfg.Limits.DeepCopy()
		if both == nil {
			both = corev1.ResourceList{}
		}
		for _, name := range qosResources {
			if _, ok := both[name]; ok {
				continue
			}
			req, ok := cfg.Requests[name]
			if !ok {
				return corev1.ResourceRequirements{}, fmt.Sprintf("the pod is Guaranteed and the sidecar's configured resources set no %s, so it would make the pod Burstable; set inject.vitals.resources.limits.%s in the chart's values", name, name)
			}
			both[name] = req.DeepCopy()
		}
		return corev1.ResourceRequirements{Requests: both, Limits: both.DeepCopy()}, ""
	}
	return *cfg.DeepCopy(), ""
}

// podLevelMisfit says why sidecar does not fit within pod's pod-level
// resources, or returns "". The API server refuses a pod whose containers'
// aggregate requests exceed its pod-level requests, and a container limit
// above the pod's limit would never apply: rather than take the sidecar's
// share out of the runner's budget unseen, the sidecar is left out.
func podLevelMisfit(pod *corev1.Pod, sidecar corev1.Container) string {
	if pod.Spec.Resources == nil {
		return ""
	}
	// The aggregate counts a native sidecar in every phase, as the
	// scheduler and the API server's validation do.
	with := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: slices.Concat([]corev1.Container{sidecar}, pod.Spec.InitContainers),
		Containers:     pod.Spec.Containers,
	}}
	total := resourcehelper.AggregateContainerRequests(with, resourcehelper.PodResourcesOptions{})
	var over []string
	for _, name := range sortedNames(pod.Spec.Resources.Requests) {
		if podReq := pod.Spec.Resources.Requests[name]; total.Name(name, resource.DecimalSI).Cmp(podReq) > 0 {
			over = append(over, fmt.Sprintf("%s requests would total %s, above the pod's %s", name, total.Name(name, resource.DecimalSI), podReq.String()))
		}
	}
	for _, name := range sortedNames(sidecar.Resources.Limits) {
		podLim, ok := pod.Spec.Resources.Limits[name]
		if lim := sidecar.Resources.Limits[name]; ok && lim.Cmp(podLim) > 0 {
			over = append(over, fmt.Sprintf("its %s limit %s is above the pod's %s", name, lim.String(), podLim.String()))
		}
	}
	if len(over) == 0 {
		return ""
	}
	return "it does not fit within the pod-level resources: " + strings.Join(over, "; ") + "; raise the pod's spec.resources by the sidecar's (the chart's inject.vitals.resources), or lower those"
}

func sortedNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
