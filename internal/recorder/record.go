package recorder

// One pod's deaths, from the reads that make its observation to the
// records written and their Events.

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/namespace"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// record writes the records of pod's deaths that are due, and says when to
// look again for those still waiting; runner is nil for a pod the watcher
// does not record (outside the opted-in namespaces, or not a runner).
// goneAt is when the pod was seen removed, zero while it exists.
func (w *Watcher) record(ctx context.Context, pod *corev1.Pod, goneAt time.Time) (time.Duration, *runnerpod.Runner, error) {
	nsLabels, ok, err := w.optedIn(ctx, pod.Namespace)
	if err != nil || !ok {
		return 0, nil, err
	}
	runner, ok := presets.Match(pod, w.Config.Presets)
	if !ok {
		return 0, nil, nil
	}
	now, keep := w.Now(), w.Config.Records
	o := death.Observation{Pod: pod, Runner: runner, GoneAt: goneAt, Now: now,
		KeepSince: now.Add(-keep.MaxAge.Duration), KeepClean: keep.CleanMaxAge.Duration > 0, CleanSince: now.Add(-keep.CleanMaxAge.Duration),
		// Read only for a death about to be written, never on a resync of
		// one on record.
		Job:      func() *v1alpha1.Job { return w.job(ctx, pod, runner) },
		Node:     func() *v1alpha1.NodeState { return w.nodeState(ctx, pod.Spec.NodeName) },
		Recorded: w.seen.Has, Enforced: w.enforced(nsLabels)}
	if pod.DeletionTimestamp != nil || !goneAt.IsZero() {
		var err error
		if o.Note, err = w.note(ctx, pod); err != nil {
			return 0, nil, err
		}
		o.EvictionRequest = w.Evictions.Of(pod.UID)
	}
	plan := death.Decide(o)
	for _, r := range plan.Records {
		if err := w.write(ctx, pod, r); err != nil {
			return 0, nil, err
		}
	}
	return plan.Retry, &runner, nil
}

// note reads the guard's note of the pod's deletion, named after its UID.
func (w *Watcher) note(ctx context.Context, pod *corev1.Pod) (*v1alpha1.DeletionNote, error) {
	n := &v1alpha1.RunnerDeletion{}
	err := w.Client.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: string(pod.UID)}, n)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &n.Deletion, nil
}

// write creates r's RunnerDeath unless the death is already on record (by
// this process or any other: the name is the death's), then notifies it.
func (w *Watcher) write(ctx context.Context, pod *corev1.Pod, r death.Record) error {
	key := r.Key()
	if w.seen.Has(key) {
		return nil
	}
	obj := r.Object()
	err := w.Client.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		w.seen.Add(key)
		return nil
	}
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		// The namespace is being deleted and takes its records with it: no
		// retry can store this one, and no Event can be written there
		// either. The death is still counted, and the log keeps the record.
		w.seen.Add(key)
		countDeath(r)
		logf.FromContext(ctx).WithName("death").Info("runner death not stored: its namespace is being deleted", "record", r)
		return nil
	}
	if err != nil {
		return err
	}
	w.seen.Add(key)
	countDeath(r)
	w.Recorder.Eventf(pod, nil, r.EventType(), r.EventReason(), "Died", "%s", r.Note())
	if owner := toldOnOwner(pod, r); owner != nil {
		w.Recorder.Eventf(owner, pod, r.EventType(), r.EventReason(), "Died", "%s", r.Note())
	}
	w.Views.follow(ctx, pod, r.Preset, client.ObjectKeyFromObject(obj))
	// One key holding the whole record: its JSON is the record's schema,
	// and its fields cannot collide with the request's own log keys.
	logf.FromContext(ctx).WithName("death").Info("runner death recorded", "record", r)
	return nil
}

func (w *Watcher) optedIn(ctx context.Context, name string) (map[string]string, bool, error) {
	// Metadata only: the same namespace informer the injector reads.
	nsLabels, err := namespace.Labels(ctx, w.Client, nil, name)
	if err != nil {
		return nil, false, client.IgnoreNotFound(err)
	}
	return nsLabels, w.Namespaces.Matches(labels.Set(nsLabels)), nil
}

// enforced reports whether a namespace with nsLabels is in enforce mode as
// the registrations select it (Modes); false when not known.
func (w *Watcher) enforced(nsLabels map[string]string) bool {
	if w.Modes == nil {
		return false
	}
	enforce, known, _ := w.Modes.Enforce(nsLabels)
	return enforce && known
}

// toldOnOwner is the pod's controlling owner, when the pod's fleet tells a
// death there too (fleet.Traits.ToldOnOwner); nil otherwise.
func toldOnOwner(pod *corev1.Pod, r death.Record) *metav1.PartialObjectMetadata {
	f, ok := presets.For(runnerpod.PresetName(r.Preset))
	if !ok || !f.Traits().ToldOnOwner {
		return nil
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: ref.Name, UID: ref.UID}}
}

// SeenSet is a bounded set of keys that forgets the oldest first: enough to
// keep the several reviews of one delete from writing a record twice,
// without growing with the cluster's history.
type SeenSet struct {
	mu    sync.Mutex
	max   int
	keys  map[string]struct{}
	order []string
}

// NewSeenSet returns an empty set that holds at most max keys.
func NewSeenSet(max int) *SeenSet {
	return &SeenSet{max: max, keys: make(map[string]struct{}, max)}
}

// Has reports whether key is remembered.
func (s *SeenSet) Has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.keys[key]
	return ok
}

// Add reports whether key was new, and remembers it.
func (s *SeenSet) Add(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.keys[key]; ok {
		return false
	}
	if len(s.order) >= s.max {
		delete(s.keys, s.order[0])
		s.order = s.order[1:]
	}
	s.keys[key] = struct{}{}
	s.order = append(s.order, key)
	return true
}

func countDeath(r death.Record) {
	if v := r.Vitals; v != nil && v.Peak != nil && v.Limit != nil && *v.Limit > 0 {
		peakRatio.WithLabelValues(r.Namespace).Observe(float64(*v.Peak) / float64(*v.Limit))
	}
	switch death.Class(r.Class) {
	case death.JobEnded, death.JobFailed:
		jobsEndedTotal.WithLabelValues(r.Namespace).Inc()
		return
	case death.IdleRemoved:
		idleRemovedTotal.WithLabelValues(r.Namespace).Inc()
		return
	}
	deathsTotal.WithLabelValues(r.Namespace, r.Class).Inc()
}
