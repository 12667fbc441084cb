package recorder

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/runnerguard/runnerguard/internal/fleet"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Records is the leader's informer of one fleet's own records of its
// runners' jobs (fleet.RecordKeeper: ARC's EphemeralRunners), each kept as
// what judges its runner's job: a job assigned to such a runner changes
// its record's status, not its pod, so the marker hears of it here.
//
// It follows the fleet's CRD: every crdCheck it asks the API server's
// discovery whether the records are served, starts an informer of them
// when they come and stops it, dropping what it held, when they go. The
// fleet installed after runnerguard, or removed, needs no restart. While
// none is served, Get finds nothing, so the fleet's runners are taken as
// busy (the guard's answer when it cannot read one); the gauge
// runnerguard_records_watched and a log line say so.
type Records struct {
	keeper      fleet.RecordKeeper
	kind        string
	served      func(context.Context) (bool, error)
	newInformer func() (toolscache.SharedIndexInformer, error)
	every       time.Duration
	// events carries each record's change to the marker, from whichever
	// informer runs.
	events chan event.GenericEvent
	// starts keeps when each runner's job began, for the marker to write
	// (nil: not kept).
	starts *JobStarts
	// jobs keeps each record's job for its runner's death record (nil:
	// not).
	jobs *LastJobs
	// checked is closed once the first check is done.
	checked   chan struct{}
	checkOnce sync.Once

	mu       sync.RWMutex
	informer toolscache.SharedIndexInformer // nil while none is served
	stop     context.CancelFunc
	stopped  chan struct{}
	// degradedSaid: the log has said the records are not served.
	degradedSaid bool
}

// crdCheck is how often the leader asks whether a fleet's records are
// served: a discovery request of one group version.
const crdCheck = 30 * time.Second

// NewRecords builds the follower of k's records on cfg; starts, when not
// nil, keeps when each runner's job began, for its pod; jobs, when not nil,
// keeps each record's job for its runner's death record.
func NewRecords(cfg *rest.Config, k fleet.RecordKeeper, starts *JobStarts, jobs *LastJobs) (*Records, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	served := func(context.Context) (bool, error) { return RecordsServed(disc, k.RecordResource()) }
	e := newFollower(k, served, recordInformer(dyn, k), crdCheck)
	e.starts, e.jobs = starts, jobs
	return e, nil
}

func newFollower(k fleet.RecordKeeper, served func(context.Context) (bool, error), newInformer func() (toolscache.SharedIndexInformer, error), every time.Duration) *Records {
	return &Records{keeper: k, kind: k.Traits().RecordKind, served: served, newInformer: newInformer, every: every,
		events: make(chan event.GenericEvent, 1024), checked: make(chan struct{})}
}

// RecordsServed reports whether the API server serves the resource:
// without the fleet's CRD there is nothing to watch.
func RecordsServed(disc discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// Start checks, until ctx ends, whether the EphemeralRunners are served,
// and watches them while they are (a manager.Runnable).
func (e *Records) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("records").WithValues("kind", e.kind)
	t := time.NewTicker(e.every)
	defer t.Stop()
	defer e.stopInformer()
	for {
		e.check(ctx, log)
		e.checkOnce.Do(func() { close(e.checked) })
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// check starts or stops the informer as the API server serves the
// records or not. An unanswered check changes nothing.
func (e *Records) check(ctx context.Context, log logr.Logger) {
	served, err := e.served(ctx)
	if err != nil {
		log.Error(err, "cannot tell whether the fleet's records are served; the watch stays as it is")
		return
	}
	watching := e.current() != nil
	switch {
	case served && !watching:
		if err := e.startInformer(ctx); err != nil {
			log.Error(err, "cannot watch the fleet's records; its runners are taken as busy until the next check")
			return
		}
		recordsWatched.WithLabelValues(e.kind).Set(1)
		e.degradedSaid = false
		log.Info("the fleet's records are served: watching them, so its runners are judged by their job")
	case !served && watching:
		e.stopInformer()
		recordsWatched.WithLabelValues(e.kind).Set(0)
		e.degradedSaid = true
		log.Info("the fleet's records are no longer served: stopped watching them; its runners are taken as busy (degraded) until they are served again")
	case !served && !e.degradedSaid:
		recordsWatched.WithLabelValues(e.kind).Set(0)
		e.degradedSaid = true
		log.Info("the fleet's records are not served (its CRDs are not installed): its runners are taken as busy (degraded) until they are; checked every " + e.every.String())
	}
}

// startInformer runs a new informer of the records whose changes go to
// the marker.
func (e *Records) startInformer(ctx context.Context) error {
	inf, err := e.newInformer()
	if err != nil {
		return err
	}
	// send takes what gone unwrapped: only a deletion comes as
	// DeletedFinalStateUnknown.
	send := func(obj any) {
		o, ok := obj.(client.Object)
		if !ok {
			return
		}
		select {
		case e.events <- event.GenericEvent{Object: o}:
		case <-ctx.Done():
		}
	}
	seen := func(obj any) {
		if rec, ok := obj.(*unstructured.Unstructured); ok {
			e.jobs.keep(rec, e.keeper.RecordJob(rec))
		}
		send(obj)
	}
	gone := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if rec, ok := obj.(*unstructured.Unstructured); ok {
			e.jobs.drop(rec, e.keeper.RecordJob(rec))
		}
		send(obj)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(before, after any) { e.noteStart(before, after); seen(after) }, DeleteFunc: gone,
	}); err != nil {
		return err
	}
	ictx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	var running sync.WaitGroup
	running.Go(func() { inf.RunWithContext(ictx) })
	running.Go(func() {
		// Synced, the watch has seen every record since now.
		if toolscache.WaitForCacheSync(ictx.Done(), inf.HasSynced) {
			e.jobs.watching(time.Now())
		}
	})
	go func() {
		running.Wait()
		close(stopped)
	}()
	e.mu.Lock()
	e.informer, e.stop, e.stopped = inf, cancel, stopped
	e.mu.Unlock()
	return nil
}

// stopInformer stops the running informer, if any, and drops what it held.
func (e *Records) stopInformer() {
	e.mu.Lock()
	stop, stopped := e.stop, e.stopped
	e.informer, e.stop, e.stopped = nil, nil, nil
	e.mu.Unlock()
	if stop != nil {
		stop()
		<-stopped
	}
	e.jobs.stopped()
}

// current is the running informer, nil while none runs.
func (e *Records) current() toolscache.SharedIndexInformer {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.informer
}

// Watching reports whether the records are watched now.
func (e *Records) Watching() bool { return e.current() != nil }

// NeedLeaderElection: only the leader marks.
func (e *Records) NeedLeaderElection() bool { return true }

// Get is the record named key, or nil.
func (e *Records) Get(key types.NamespacedName) *unstructured.Unstructured {
	inf := e.current()
	if inf == nil {
		return nil
	}
	obj, ok, err := inf.GetIndexer().GetByKey(key.String())
	if err != nil || !ok {
		return nil
	}
	return obj.(*unstructured.Unstructured)
}
