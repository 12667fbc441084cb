package recorder

// The pods the cache dropped, kept until their deaths are planned: the
// watcher's own sightings and the gap's.

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// gonePod is a pod the cache dropped, and when.
type gonePod struct {
	pod *corev1.Pod
	at  time.Time
}

// removed keeps the last state of a pod the cache dropped until its deaths
// are planned.
func (w *Watcher) removed(pod *corev1.Pod) {
	key := client.ObjectKeyFromObject(pod)
	w.mu.Lock()
	defer w.mu.Unlock()
	gs := slices.DeleteFunc(w.gone[key], func(g gonePod) bool { return g.pod.UID == pod.UID })
	w.gone[key] = append(gs, gonePod{pod: pod.DeepCopy(), at: w.Now()})
}

// removedAt keeps a removal another replica's watch saw at (the gap's),
// unless the watcher holds that pod's removal already: its own sighting
// and the gap's are the same removal.
func (w *Watcher) removedAt(pod *corev1.Pod, at time.Time) {
	key := client.ObjectKeyFromObject(pod)
	w.mu.Lock()
	defer w.mu.Unlock()
	if slices.ContainsFunc(w.gone[key], func(g gonePod) bool { return g.pod.UID == pod.UID }) {
		return
	}
	w.gone[key] = append(w.gone[key], gonePod{pod: pod, at: at})
}

// goneOf is the removed pods named key, not yet planned.
func (w *Watcher) goneOf(key types.NamespacedName) []gonePod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.gone[key])
}

// forget drops the removed pod of that name and UID once planned.
func (w *Watcher) forget(key types.NamespacedName, uid types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	gs := slices.DeleteFunc(w.gone[key], func(g gonePod) bool { return g.pod.UID == uid })
	if len(gs) == 0 {
		delete(w.gone, key)
		return
	}
	w.gone[key] = gs
}
