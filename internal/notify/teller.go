package notify

import (
	"cmp"
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
)

// StallTeller tells runners' stalls on their jobs' commits, on the leader,
// apart from the watcher that sees them: the watcher hands it each
// transition and goes on; its workers make the calls. Each transition is
// tried once, its failure logged: a stall's report is a courtesy, the
// death's report (with its own retries) the account.
type StallTeller struct {
	Config  config.Reports
	Senders map[string]Sender
	// Settle is StallSettle unless set (tests).
	Settle time.Duration

	once  sync.Once
	queue workqueue.TypedDelayingInterface[types.UID]
	mu    sync.Mutex
	// pending is the latest transition of each pod not yet taken by a
	// worker. The queue never hands a pod to two workers at once, so a
	// stall's end waits for its telling.
	pending map[types.UID]stallItem
	// told holds each stall handed over until its end is: the deliveries
	// it was told to, once told, so that its end reads nothing from the
	// cluster and goes where the stall went.
	told map[types.UID][]StallDelivery
}

type stallItem struct {
	stall Stall
	facts StallFacts
}

// StallFacts reads what a stall's report adds when it is told, not when
// it is seen: the pod's job, and the runner's memory limit (0: none).
type StallFacts func(context.Context) (job *v1alpha1.Job, limit int64)

// Bounds: how many stalls are held at once, how many calls run at once
// and for how long each transition's calls may take.
const (
	maxStalls    = 4096
	stallWorkers = 2
	stallTimeout = 30 * time.Second
)

// StallSettle is how long after a stalled pod's end its report is
// completed, if still open: long enough for the death's report, which
// completes it, to come first; not so long that a pipeline shows running
// long after its job.
const StallSettle = 2 * time.Minute

func (t *StallTeller) init() {
	t.once.Do(func() {
		t.queue = workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[types.UID]{Name: "stall-reports"})
		t.pending = map[types.UID]stallItem{}
		t.told = map[types.UID][]StallDelivery{}
	})
}

// Stalled hands over a new stall; facts are read when it is told.
func (t *StallTeller) Stalled(ctx context.Context, s Stall, facts StallFacts) {
	t.init()
	uid := types.UID(s.Record.UID)
	t.mu.Lock()
	_, held := t.told[uid]
	if !held && len(t.told) >= maxStalls {
		t.mu.Unlock()
		logf.FromContext(ctx).Info("stall not reported: too many stalls held", "pod", s.Record.Namespace+"/"+s.Record.Pod)
		return
	}
	if !held {
		t.told[uid] = nil
	}
	t.pending[uid] = stallItem{stall: s, facts: facts}
	t.mu.Unlock()
	t.queue.Add(uid)
}

// End hands over a told stall's end: told at once when the runner
// recovered; after StallSettle when its pod ended, and only if no death's
// report completed it meanwhile.
func (t *StallTeller) End(s Stall) {
	after := time.Duration(0)
	if s.Phase != StallRecovered {
		after = cmp.Or(t.Settle, StallSettle)
	}
	t.end(s, after)
}

func (t *StallTeller) end(s Stall, after time.Duration) {
	t.init()
	uid := types.UID(s.Record.UID)
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, held := t.told[uid]; !held {
		return
	}
	if p, ok := t.pending[uid]; ok && p.stall.Phase == StallUnderWay {
		// Over before it was told: nothing to tell.
		delete(t.pending, uid)
		delete(t.told, uid)
		return
	}
	t.pending[uid] = stallItem{stall: s}
	t.queue.AddAfter(uid, after)
}

// Start runs the workers until ctx ends.
func (t *StallTeller) Start(ctx context.Context) error {
	t.init()
	var wg sync.WaitGroup
	for range stallWorkers {
		wg.Go(func() {
			for t.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	t.queue.ShutDown()
	wg.Wait()
	return nil
}

// NeedLeaderElection: only the leader sees stalls and tells them.
func (t *StallTeller) NeedLeaderElection() bool { return true }

func (t *StallTeller) next(ctx context.Context) bool {
	uid, shutdown := t.queue.Get()
	if shutdown {
		return false
	}
	defer t.queue.Done(uid)
	t.mu.Lock()
	it, ok := t.pending[uid]
	delete(t.pending, uid)
	t.mu.Unlock()
	if ok {
		t.tell(ctx, uid, it)
	}
	return true
}

// tell makes one transition's calls, each once.
func (t *StallTeller) tell(ctx context.Context, uid types.UID, it stallItem) {
	s := it.stall
	log := logf.FromContext(ctx).WithValues("pod", s.Record.Namespace+"/"+s.Record.Pod, "phase", s.Phase)
	ctx, cancel := context.WithTimeout(ctx, stallTimeout)
	defer cancel()
	var ds []StallDelivery
	if s.Phase == StallUnderWay {
		if it.facts != nil {
			s.Record.Job, s.Limit = it.facts(ctx)
		}
		for _, target := range PlanStall(s.Record, t.Config) {
			ds = append(ds, StallDelivery{Stall: s, Target: target})
		}
		t.mu.Lock()
		if _, held := t.told[uid]; held {
			t.told[uid] = ds
		}
		t.mu.Unlock()
	} else {
		t.mu.Lock()
		for _, d := range t.told[uid] {
			// The stall as it was told, with its end.
			d.Stall.Phase, d.Stall.At = s.Phase, s.At
			ds = append(ds, d)
		}
		delete(t.told, uid)
		t.mu.Unlock()
	}
	for _, d := range ds {
		sender, ok := t.Senders[d.Target.Destination].(StallSender)
		if !ok {
			continue
		}
		where, err := sender.TellStall(ctx, d)
		if err != nil {
			log.Info("stall report failed", "destination", d.Target.Destination, "error", err.Error())
			continue
		}
		log.V(1).Info("stall reported", "destination", d.Target.Destination, "where", where)
	}
}
