package guard

import (
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
