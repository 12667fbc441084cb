package watch

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

// StripPod is the pod cache's transform: it keeps only what the death
// record and the stuck check read, so the cache stays small with thousands
// of pods (no managed fields, no specs beyond container names, no runner
// termination messages, which can be 4 KiB each).
func StripPod(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		// The guard's metadata informer of the same pods: it reads only
		// which pod has which UID.
		out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
		out.Namespace, out.Name, out.UID, out.ResourceVersion = m.Namespace, m.Name, m.UID, m.ResourceVersion
		return out, nil
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{TypeMeta: pod.TypeMeta}
	m := pod.ObjectMeta
	out.ObjectMeta = m
	out.ManagedFields = nil
	out.Annotations = nil
	for k, v := range m.Annotations {
		if strings.HasPrefix(k, "runnerguard.io/") || k == runnerpod.ARCLegacyUnregistered {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	out.Spec.NodeName = pod.Spec.NodeName
	// How long a graceful deletion can take: the guard's note of a delete
	// counts within it (death.Decide).
	out.Spec.TerminationGracePeriodSeconds = pod.Spec.TerminationGracePeriodSeconds
	for _, c := range pod.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name})
	}
	for _, c := range pod.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy})
	}
	s := pod.Status
	out.Status = corev1.PodStatus{Phase: s.Phase, Reason: s.Reason, Message: s.Message}
	for _, c := range s.Conditions {
		// DisruptionTarget: the control plane's note of why it takes the
		// pod down (pod GC of a lost node), which classifies the death.
		if c.Type == corev1.PodScheduled || c.Type == corev1.DisruptionTarget {
			out.Status.Conditions = append(out.Status.Conditions, c)
		}
	}
	for _, cs := range s.ContainerStatuses {
		out.Status.ContainerStatuses = append(out.Status.ContainerStatuses, dropMessages(cs))
	}
	for _, cs := range s.InitContainerStatuses {
		if cs.Name != runnerpod.VitalsContainer {
			// A running poller init container tells an idle pool runner
			// from a stuck one.
			cs = dropMessages(cs)
		}
		// The vitals' final reading is the one message the record joins.
		out.Status.InitContainerStatuses = append(out.Status.InitContainerStatuses, cs)
	}
	return out, nil
}

func dropMessages(cs corev1.ContainerStatus) corev1.ContainerStatus {
	cs.Resources, cs.VolumeMounts, cs.AllocatedResources, cs.User = nil, nil, nil, nil
	if t := cs.State.Terminated; t != nil {
		t = t.DeepCopy()
		t.Message = ""
		cs.State.Terminated = t
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		t = t.DeepCopy()
		t.Message = ""
		cs.LastTerminationState.Terminated = t
	}
	return cs
}
