package recorder

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// LastJobs keeps, by EphemeralRunner UID, what the leader's own watch saw
// of each EphemeralRunner: whether it saw it at all, and the job it last
// named. ARC deletes a finished runner's EphemeralRunner, then its pod, and
// the record is written after: the job is read here, captured while it was
// visible, from the API server's watch rather than from a review that
// anyone on the pod network could post.
//
// The EphemeralRunners the watch holds are kept while it holds them (the
// informer holds them too); those it saw deleted are kept up to a bound,
// the oldest deletion first out. A replica that came to lead after the
// job began has not seen it; the record then falls back on the guard's
// note. Whether that note can be coming at all is told by Unseen.
type LastJobs struct {
	mu   sync.Mutex
	live map[types.UID]*v1alpha1.Job // nil job: seen, no job named yet
	gone map[types.UID]*v1alpha1.Job
	// goneOrder is the order of the deletions kept, oldest first.
	goneOrder []types.UID
	max       int
	// since: the watch has seen every EphemeralRunner that existed at any
	// time after it (zero while none is watched).
	since time.Time
}

// LastJobsKept bounds the deleted EphemeralRunners kept: far more runners
// than end between a deletion and its record.
const LastJobsKept = 4096

// clockSkew is how far the API server's clock (a pod's creation time) and
// the leader's (the watch's start) are taken to differ at most.
const clockSkew = time.Minute

// NewLastJobs keeps up to max deleted EphemeralRunners.
func NewLastJobs(max int) *LastJobs {
	return &LastJobs{live: map[types.UID]*v1alpha1.Job{}, gone: map[types.UID]*v1alpha1.Job{}, max: max}
}

// keep notes that the watch holds er, and job, the job it names, if any
// (ARC never clears it, but a job once seen is not forgotten). A nil
// LastJobs keeps nothing.
func (l *LastJobs) keep(er *unstructured.Unstructured, job *v1alpha1.Job) {
	if l == nil || er == nil || er.GetUID() == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if job == nil {
		job = l.live[er.GetUID()]
	}
	l.live[er.GetUID()] = job
}

// drop notes er's deletion: what it named (job, or what it named before)
// moves to the deleted ones kept.
func (l *LastJobs) drop(er *unstructured.Unstructured, job *v1alpha1.Job) {
	if l == nil || er == nil || er.GetUID() == "" {
		return
	}
	l.keep(er, job)
	uid := er.GetUID()
	l.mu.Lock()
	defer l.mu.Unlock()
	job = l.live[uid]
	delete(l.live, uid)
	if _, ok := l.gone[uid]; !ok {
		if len(l.goneOrder) >= l.max {
			delete(l.gone, l.goneOrder[0])
			l.goneOrder = l.goneOrder[1:]
		}
		l.goneOrder = append(l.goneOrder, uid)
	}
	l.gone[uid] = job
}

// watching notes that the watch, synced at at, has seen every
// EphemeralRunner since; stopped, that no watch runs: what it held live is
// forgotten (its deletions will not be seen), what it saw deleted kept.
func (l *LastJobs) watching(at time.Time) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since = at
}

func (l *LastJobs) stopped() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since = time.Time{}
	l.live = map[types.UID]*v1alpha1.Job{}
}

// Job is the job last seen on the EphemeralRunner of that UID, or nil.
func (l *LastJobs) Job(uid types.UID) *v1alpha1.Job {
	if l == nil || uid == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	j := l.live[uid]
	if j == nil {
		j = l.gone[uid]
	}
	return j.DeepCopy()
}

// Unseen reports whether the EphemeralRunner of that UID, named as the
// owner of a pod created at created, is one the watch would have seen and
// did not: the watch has run since before the pod (an owner exists before
// its pod), and never held it. No such EphemeralRunner existed, or its
// deletion is past what is kept; either way no note of it is worth a wait
// (anyone who can create pods can name an owner that never was).
func (l *LastJobs) Unseen(uid types.UID, created time.Time) bool {
	if l == nil || uid == "" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.since.IsZero() || !created.After(l.since.Add(clockSkew)) {
		return false
	}
	_, live := l.live[uid]
	_, gone := l.gone[uid]
	return !live && !gone
}
