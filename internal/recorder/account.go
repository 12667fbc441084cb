package recorder

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The reads a death's record adds to what the pod's status holds, handed
// to death.Decide, which makes them only for a death about to be recorded.

// job is the job the runner ran: for a fleet that keeps its own record of
// the job (ARC scale sets: the EphemeralRunner that owns the pod), from that
// record as the guard reads it (a later record of the same name is another
// runner), or, that record gone, from what the leader's watch last saw it
// name (LastJobs), else from the guard's note of its deletion; else, or
// when these name none, from the pod's labels and annotations the preset
// names.
func (w *Watcher) job(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) *v1alpha1.Job {
	if presets.KeepsRecord(runner) {
		if j := w.recordJob(ctx, pod, runner); j != nil {
			// Whether the fleet's controller created the pod: only then is
			// the job the fleet's record names this pod's (a report's
			// destination rests on it).
			j = j.DeepCopy()
			j.CreatedBy = runnerpod.JobField(pod.Annotations[runnerpod.CreatedBy])
			return j
		}
	}
	return runnerpod.JobFromPod(pod, runner.Preset.Job)
}

// JobOf is the job a death of pod would name now (job).
func (w *Watcher) JobOf(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) *v1alpha1.Job {
	return w.job(ctx, pod, runner)
}

// recordJob is the job the fleet's record of the pod names, as job reads
// it; nil when none does.
func (w *Watcher) recordJob(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) *v1alpha1.Job {
	er, err := presets.ReadRecord(ctx, w.Reader, runner, pod)
	switch {
	case errors.Is(err, fleet.ErrNotOwner):
		logf.FromContext(ctx).Info("the record names no job from the fleet's record", "pod", pod.Namespace+"/"+pod.Name, "error", err.Error())
	case apierrors.IsNotFound(err):
		// The leader's own watch first: no wait, no review's word.
		if j := w.Jobs.Job(presets.RecordRef(runner, pod).UID); j != nil {
			return j
		}
		return w.ownerNoteJob(ctx, pod, runner)
	case err != nil:
		logf.FromContext(ctx).V(1).Info("cannot read the fleet's record; the death record names no job from it", "pod", pod.Namespace+"/"+pod.Name, "error", err.Error())
	default:
		return er.Job
	}
	return nil
}

// ownerNoteJob is the job the guard's note of the deletion of the fleet's
// record of the pod kept (named after the record's UID): ARC deletes the
// EphemeralRunner of a runner that ended, and it is gone by the death's
// record. It waits for the note, which ARC's finalizer can outrun, unless
// the leader's watch says no such record was: a pod anyone could
// create, naming an owner that never existed, costs one read, not a wait
// that holds a record worker.
func (w *Watcher) ownerNoteJob(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) *v1alpha1.Job {
	ref := presets.RecordRef(runner, pod)
	within := deletion.OwnerNoteWait
	if w.Jobs.Unseen(ref.UID, pod.CreationTimestamp.Time) {
		within = 0
	}
	if n, _ := deletion.OwnerNote(ctx, w.Client, pod.Namespace, ref, within); n != nil {
		return n.Job
	}
	return nil
}

// nodeMemoTTL is how long a node's state read serves other deaths on the
// same node: a drain or a lost node ends many runners at once, and one
// read serves them all.
const nodeMemoTTL = 10 * time.Second

// nodeMemo keeps recent node reads; small (one entry per node with a
// recent death), pruned as it grows.
type nodeMemo struct {
	mu sync.Mutex
	m  map[string]nodeRead
}

type nodeRead struct {
	state *v1alpha1.NodeState
	at    time.Time
}

// nodeState is the state of the node named, read uncached (the leader
// keeps no nodes: a Node's status can be tens of KiB of images) at most
// once per nodeMemoTTL; nil when unknown (no node, or the read failed).
func (w *Watcher) nodeState(ctx context.Context, name string) *v1alpha1.NodeState {
	if name == "" {
		return nil
	}
	now := w.Now()
	w.nodes.mu.Lock()
	if r, ok := w.nodes.m[name]; ok && now.Sub(r.at) < nodeMemoTTL {
		w.nodes.mu.Unlock()
		return r.state
	}
	w.nodes.mu.Unlock()
	n := &corev1.Node{}
	err := w.Reader.Get(ctx, client.ObjectKey{Name: name}, n)
	var s *v1alpha1.NodeState
	switch {
	case apierrors.IsNotFound(err):
		s = death.NodeStateOf(nil)
	case err != nil:
		logf.FromContext(ctx).Info("cannot read the runner's node; the record has no node state", "node", name, "error", err.Error())
		return nil
	default:
		s = death.NodeStateOf(n)
	}
	w.nodes.mu.Lock()
	defer w.nodes.mu.Unlock()
	if w.nodes.m == nil {
		w.nodes.m = map[string]nodeRead{}
	}
	if len(w.nodes.m) >= 256 {
		for k, r := range w.nodes.m {
			if now.Sub(r.at) >= nodeMemoTTL {
				delete(w.nodes.m, k)
			}
		}
	}
	w.nodes.m[name] = nodeRead{state: s, at: now}
	return s
}
