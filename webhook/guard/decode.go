package guard

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// reviewedPod is a pod as the guard decodes it from a review: whole, but
// for what no rule of the guard reads and what makes up most of a pod's
// bytes: managedFields, volumes, and every field of a container but its
// name (and an init container's restart policy). Those are skipped over,
// not decoded: a refusal costs less, and a review padded there (a flood's
// env) costs its bytes, not their heap. Decide and everything the guard
// writes read the pod only through decodePod's result, and TestDecide
// judges each of its pods both ways.
type reviewedPod struct {
	Metadata reviewedMeta     `json:"metadata"`
	Spec     reviewedSpec     `json:"spec"`
	Status   corev1.PodStatus `json:"status"`
}

// The outer fields shadow the embedded ones of the same JSON name.
type reviewedMeta struct {
	metav1.ObjectMeta
	ManagedFields unread `json:"managedFields"`
}

type reviewedSpec struct {
	corev1.PodSpec
	Volumes             unread              `json:"volumes"`
	Containers          []reviewedContainer `json:"containers"`
	InitContainers      []reviewedContainer `json:"initContainers"`
	EphemeralContainers unread              `json:"ephemeralContainers"`
}

type reviewedContainer struct {
	Name          string                         `json:"name"`
	RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy,omitempty"`
}

// unread is a field skipped over: the decoder still checks that it is
// well-formed JSON, but not that it is well-typed (a pod the API server
// sends always is).
type unread struct{}

func (*unread) UnmarshalJSON([]byte) error { return nil }

// decodePod decodes the pod of a review, as reviewedPod says.
func decodePod(raw []byte) (*corev1.Pod, error) {
	var r reviewedPod
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	// A pod whatever kind the review claims: the Events about it say so.
	pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: r.Metadata.ObjectMeta, Spec: r.Spec.PodSpec, Status: r.Status}
	pod.Spec.Containers = containers(r.Spec.Containers)
	pod.Spec.InitContainers = containers(r.Spec.InitContainers)
	return pod, nil
}

func containers(rc []reviewedContainer) []corev1.Container {
	if rc == nil {
		return nil
	}
	out := make([]corev1.Container, len(rc))
	for i, c := range rc {
		out[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy}
	}
	return out
}

// slim is pod as decodePod would have decoded it: what the guard reads of
// a pod it read itself (podread.go) is what it reads of a review's.
func slim(pod *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: pod.ObjectMeta, Spec: pod.Spec, Status: pod.Status}
	out.ManagedFields = nil
	out.Spec.Volumes = nil
	out.Spec.EphemeralContainers = nil
	out.Spec.Containers = slimContainers(pod.Spec.Containers)
	out.Spec.InitContainers = slimContainers(pod.Spec.InitContainers)
	return out
}

func slimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy}
	}
	return out
}
