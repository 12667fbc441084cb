package recorder

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/fleet"
)

// LastJobs keeps, by EphemeralRunner UID, the job the leader's own watch
// last saw each EphemeralRunner name. ARC deletes a finished runner's
// EphemeralRunner, then its pod, and the record is written after: the job
// is read here, captured while it was visible, from the API server's watch
// rather than from a review that anyone on the pod network could post.
// A replica that came to lead after the job began has not seen it; the
// record then falls back on the guard's note. Bounded: the oldest UID goes
// first.
type LastJobs struct {
	mu    sync.Mutex
	jobs  map[types.UID]*v1alpha1.Job
	order []types.UID
	max   int
}

// LastJobsKept bounds the jobs kept: far more runners than end between a
// deletion and its record.
const LastJobsKept = 4096

// NewLastJobs keeps up to max jobs.
func NewLastJobs(max int) *LastJobs {
	return &LastJobs{jobs: map[types.UID]*v1alpha1.Job{}, max: max}
}

// keep notes the job er's status names, if any. A nil LastJobs keeps
// nothing.
func (l *LastJobs) keep(er *unstructured.Unstructured) {
	if l == nil || er == nil || er.GetUID() == "" {
		return
	}
	job := fleet.JobFromEphemeralRunner(er)
	if job == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.jobs[er.GetUID()]; !ok {
		if len(l.order) >= l.max {
			delete(l.jobs, l.order[0])
			l.order = l.order[1:]
		}
		l.order = append(l.order, er.GetUID())
	}
	l.jobs[er.GetUID()] = job
}

// Job is the job last seen on the EphemeralRunner of that UID, or nil.
func (l *LastJobs) Job(uid types.UID) *v1alpha1.Job {
	if l == nil || uid == "" {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if j := l.jobs[uid]; j != nil {
		return j.DeepCopy()
	}
	return nil
}
