package guard

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// PodCacheOptions are the guard's cache of runner pods, on every replica: their
// metadata (labelled runner pods only), stripped to what confirm reads, so
// that no replica holds whole pods for the guard.
func PodCacheOptions() cache.ByObject {
	return cache.ByObject{Label: runnerpod.Labelled(), Transform: StripPod}
}

// StripPod is the transform of the guard's metadata informer of runner
// pods, on every replica: it reads only which pod has which UID, and
// whether its deletion has begun (a note waits for it).
func StripPod(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	out.Namespace, out.Name, out.UID, out.ResourceVersion = m.Namespace, m.Name, m.UID, m.ResourceVersion
	out.DeletionTimestamp = m.DeletionTimestamp
	return out, nil
}

// NodeCacheOptions are the cache of nodes' metadata, on every replica: the
// guard reads a busy runner's node there for its drain deadline (NodeMeta),
// as the leader's marker does. Stripped to the deadline, so no replica
// holds the nodes' labels and annotations.
func NodeCacheOptions() cache.ByObject {
	return cache.ByObject{Transform: StripNode}
}

// StripNode is the transform of the nodes' metadata informer: a node's
// name, UID, version and drain deadline (runnerpod.NodeDrainDeadline).
// Whole nodes, which the cache does not hold, pass as they are.
func StripNode(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	out := &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta}
	out.Name, out.UID, out.ResourceVersion = m.Name, m.UID, m.ResourceVersion
	for _, k := range []string{runnerpod.DrainDeadline, runnerpod.DrainDeadlineBy} {
		if v, ok := m.Annotations[k]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	return out, nil
}

// NodeMeta is a Node as metadata, as the nodes' cache holds it.
func NodeMeta() *metav1.PartialObjectMetadata {
	n := &metav1.PartialObjectMetadata{}
	n.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Node"))
	return n
}
