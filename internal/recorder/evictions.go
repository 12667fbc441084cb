package recorder

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
)

// Answered keeps, by pod UID, the eviction request the leader's responder
// let each runner pod go on, for the death its eviction causes: the
// watcher writes that record moments later, in the same process. A
// leader that took over after the answer does not know it, and that
// record names no request; the evictor still stands in it as the deleter.
type Answered struct {
	mu  sync.Mutex
	m   map[types.UID]answered
	max int
}

type answered struct {
	ref v1alpha1.EvictionRequestRef
	at  time.Time
}

// AnsweredKept bounds Answered: more pods than a drain of the largest
// fleet lets go before their records are written.
const AnsweredKept = 10000

// NewAnswered keeps up to max answers, the oldest dropped first.
func NewAnswered(max int) *Answered {
	return &Answered{m: map[types.UID]answered{}, max: max}
}

func (a *Answered) keep(uid types.UID, ref v1alpha1.EvictionRequestRef, at time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.m[uid]; !ok && len(a.m) >= a.max {
		var oldest types.UID
		for k, v := range a.m {
			if oldest == "" || v.at.Before(a.m[oldest].at) {
				oldest = k
			}
		}
		delete(a.m, oldest)
	}
	a.m[uid] = answered{ref: ref, at: at}
}

// forget drops the pod's answer: the request was withdrawn, so the pod's
// death, whenever it comes, is not its doing.
func (a *Answered) forget(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.m, uid)
}

// Of is the eviction request the pod uid went on, nil when none (or a nil
// Answered: the API server has no eviction requests).
func (a *Answered) Of(uid types.UID) *v1alpha1.EvictionRequestRef {
	if a == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if v, ok := a.m[uid]; ok {
		return v.ref.DeepCopy()
	}
	return nil
}
