package recorder

import (
	"slices"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// cachedPod is what the watcher's cache keeps of a runner pod: what the
// death record and the stuck check read (pod reads it back as a Pod). No
// managed fields, no specs beyond container names, no image names, no
// termination messages but a container's last words (its tail, at most
// death.MaxMessageBytes, which only a container that has ended has), only
// the labels and annotations runnerguard reads: a corev1.Pod stripped of as
// much still carries its empty structs, which dominate the leader's heap at
// fleet size.
type cachedPod struct {
	metav1.ObjectMeta
	node string
	// grace is how long a graceful deletion can take: the guard's note of
	// a delete counts within it (death.Decide).
	grace      *int64
	containers []string
	// probed are the containers with a liveness probe: a kill of one while
	// its pod is not being deleted is the kubelet's (death.ProbeKill).
	probed []string
	// sidecars are the init containers that run for the pod's life: a
	// running init container that is not one gates the runner (an idle
	// pool runner's poller).
	sidecars []string
	// Of the status (whose empty structs are most of a stripped pod): its phase,
	// reason and message, the conditions that tell why it is pending or
	// taken down, and the container states.
	phase                  corev1.PodPhase
	reason, message        string
	conditions             []corev1.PodCondition
	statuses, initStatuses []corev1.ContainerStatus
	// deadline (activeDeadlineSeconds) and start bound the runner's
	// protection, which the marker reads (runnerpod.PodDeadline).
	deadline *int64
	start    *metav1.Time
}

// compact is the cache's transform when no preset reads a job from pod
// labels or annotations.
func compact(obj any) (any, error) { return compactor{}.compact(obj) }

// fleetLabels and fleetAnnotations are the marks of a fleet that Match
// and the fleets' idle signals read (presets.Marks), listed once.
var fleetLabels, fleetAnnotations = presets.Marks()

// compactor is the cache's transform: it keeps, beyond what Match reads,
// the labels and annotations presets read a job from.
type compactor struct{ labels, annotations []string }

// compact is the cache's transform. The informer may hand it what it
// already made (a resync), which it keeps.
func (k compactor) compact(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	c := &cachedPod{node: pod.Spec.NodeName, grace: pod.Spec.TerminationGracePeriodSeconds}
	m := pod.ObjectMeta
	c.Namespace, c.Name, c.UID, c.ResourceVersion = m.Namespace, m.Name, m.UID, m.ResourceVersion
	c.CreationTimestamp, c.DeletionTimestamp, c.DeletionGracePeriodSeconds = m.CreationTimestamp, m.DeletionTimestamp, m.DeletionGracePeriodSeconds
	c.OwnerReferences = m.OwnerReferences
	// Only the marks of a fleet Match reads: not the runner label every
	// cached pod has, nor the injector's annotations (a map costs a pod 300
	// bytes).
	c.Labels = keep(m.Labels, fleetLabels, k.labels, markerLabels)
	c.Annotations = keep(m.Annotations, fleetAnnotations, k.annotations, markerAnnotations, jobAnnotations, refusalAnnotations, creatorAnnotations, zombieAnnotations)
	c.deadline, c.start = pod.Spec.ActiveDeadlineSeconds, pod.Status.StartTime
	for _, ct := range pod.Spec.Containers {
		c.containers = append(c.containers, ct.Name)
		if ct.LivenessProbe != nil {
			c.probed = append(c.probed, ct.Name)
		}
	}
	for _, ct := range pod.Spec.InitContainers {
		if ct.RestartPolicy != nil && *ct.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			c.sidecars = append(c.sidecars, ct.Name)
		}
	}
	s := pod.Status
	c.phase, c.reason, c.message = s.Phase, s.Reason, s.Message
	if len(c.message) > maxPodMessage {
		c.message = c.message[:maxPodMessage] // the record keeps less
	}
	for _, cd := range s.Conditions {
		// DisruptionTarget: the control plane's note of why it takes the
		// pod down (pod GC of a lost node), which classifies the death.
		if cd.Type == corev1.PodScheduled || cd.Type == corev1.DisruptionTarget {
			c.conditions = append(c.conditions, cd)
		}
	}
	for _, cs := range s.ContainerStatuses {
		c.statuses = append(c.statuses, stripStatus(cs, false))
	}
	for _, cs := range s.InitContainerStatuses {
		// Of init containers, the vitals sidecar (its final reading is the
		// one message a record joins) and a running init container that
		// gates the runner (an idle pool runner's poller, not a stuck one).
		switch {
		case cs.Name == runnerpod.VitalsContainer:
			c.initStatuses = append(c.initStatuses, stripStatus(cs, false))
		case cs.State.Running != nil && !slices.Contains(c.sidecars, cs.Name):
			c.initStatuses = append(c.initStatuses, stripStatus(cs, true))
		}
	}
	return c, nil
}

// keep is the entries of m whose keys are among those of lists; nil when
// none.
func keep(m map[string]string, lists ...[]string) map[string]string {
	var out map[string]string
	for k, v := range m {
		if slices.ContainsFunc(lists, func(keys []string) bool { return slices.Contains(keys, k) }) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// maxPodMessage bounds the pod's status message in the cache: the kubelet's
// eviction message is a sentence or two.
const maxPodMessage = 2048

// stripStatus is cs without what no record reads: images, resources, mounts
// and, with dropMessages, its termination messages; without it, their
// tails, as much as a record keeps.
func stripStatus(cs corev1.ContainerStatus, dropMessages bool) corev1.ContainerStatus {
	cs.Image, cs.ImageID = "", ""
	cs.Resources, cs.VolumeMounts, cs.AllocatedResources, cs.AllocatedResourcesStatus, cs.User = nil, nil, nil, nil, nil
	for _, t := range []**corev1.ContainerStateTerminated{&cs.State.Terminated, &cs.LastTerminationState.Terminated} {
		if *t == nil {
			continue
		}
		msg := ""
		if !dropMessages {
			// A character's worth more than a record keeps, so the record
			// still sees that the message was cut.
			msg, _ = death.Tail((*t).Message, death.MaxMessageBytes+utf8.UTFMax)
		}
		if msg != (*t).Message {
			c := **t
			c.Message = msg
			*t = &c
		}
	}
	return cs
}

// GetObjectKind: the cache's objects carry no type.
func (c *cachedPod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies everything the cache's readers might share.
func (c *cachedPod) DeepCopyObject() runtime.Object {
	out := &cachedPod{node: c.node, containers: slices.Clone(c.containers), probed: slices.Clone(c.probed), sidecars: slices.Clone(c.sidecars),
		phase: c.phase, reason: c.reason, message: c.message}
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	// The status's own deep copy, of the fields kept.
	st := c.pod().Status.DeepCopy()
	out.conditions, out.statuses, out.initStatuses = st.Conditions, st.ContainerStatuses, st.InitContainerStatuses
	if c.grace != nil {
		out.grace = ptr.To(*c.grace)
	}
	if c.deadline != nil {
		out.deadline = ptr.To(*c.deadline)
	}
	out.start = c.start.DeepCopy()
	return out
}
