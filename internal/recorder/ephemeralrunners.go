package recorder

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
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

// ephemeralRunnerVersion is the version of ARC's EphemeralRunners the
// cache lists.
var ephemeralRunnerVersion = schema.GroupVersionResource{Group: arcscaleset.Group, Version: "v1alpha1", Resource: arcscaleset.Resource}

// EphemeralRunners is the leader's informer of ARC's EphemeralRunners, each
// kept as what judges its runner's job (runnerpod.EphemeralRunnerJob): a
// job assigned to a scale-set runner changes its EphemeralRunner's status,
// not its pod, so the marker hears of it here.
//
// It follows ARC's CRD: every crdCheck it asks the API server's discovery
// whether EphemeralRunners are served, starts an informer of them when
// they come and stops it, dropping what it held, when they go. ARC
// installed after runnerguard, or removed, needs no restart. While none is
// served, Get finds nothing, so ARC's runners are taken as busy (the
// guard's answer when it cannot read one); the gauge
// runnerguard_ephemeralrunners_watched and a log line say so.
type EphemeralRunners struct {
	served      func(context.Context) (bool, error)
	newInformer func() (toolscache.SharedIndexInformer, error)
	every       time.Duration
	// events carries each EphemeralRunner change to the marker, from
	// whichever informer runs.
	events chan event.GenericEvent
	// stamper writes when a runner's job began, from starts (nil: not).
	stamper *JobStamper
	starts  chan jobStart
	// jobs keeps each EphemeralRunner's job for its record (nil: not).
	jobs *LastJobs
	// checked is closed once the first check is done.
	checked   chan struct{}
	checkOnce sync.Once

	mu       sync.RWMutex
	informer toolscache.SharedIndexInformer // nil while none is served
	stop     context.CancelFunc
	stopped  chan struct{}
	// degradedSaid: the log has said the EphemeralRunners are not served.
	degradedSaid bool
}

// crdCheck is how often the leader asks whether ARC's EphemeralRunners are
// served: a discovery request of one group version.
const crdCheck = 30 * time.Second

// NewEphemeralRunners builds the follower of ARC's EphemeralRunners on cfg;
// stamper, when not nil, writes on each runner's pod when its job began;
// jobs, when not nil, keeps each one's job for its runner's record.
func NewEphemeralRunners(cfg *rest.Config, stamper *JobStamper, jobs *LastJobs) (*EphemeralRunners, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	served := func(context.Context) (bool, error) { return EphemeralRunnersServed(disc) }
	e := newFollower(served, ephemeralRunnerInformer(dyn), crdCheck)
	e.stamper, e.jobs = stamper, jobs
	return e, nil
}

func newFollower(served func(context.Context) (bool, error), newInformer func() (toolscache.SharedIndexInformer, error), every time.Duration) *EphemeralRunners {
	return &EphemeralRunners{served: served, newInformer: newInformer, every: every,
		events: make(chan event.GenericEvent, 1024), starts: make(chan jobStart, 256), checked: make(chan struct{})}
}

// EphemeralRunnersServed reports whether the API server serves ARC's
// EphemeralRunners: without ARC's CRD there is nothing to watch.
func EphemeralRunnersServed(disc discovery.DiscoveryInterface) (bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(ephemeralRunnerVersion.GroupVersion().String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == ephemeralRunnerVersion.Resource {
			return true, nil
		}
	}
	return false, nil
}

// Start checks, until ctx ends, whether the EphemeralRunners are served,
// and watches them while they are (a manager.Runnable).
func (e *EphemeralRunners) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("ephemeralrunners")
	if e.stamper != nil {
		go e.stamper.stampAll(ctx, e.starts)
	}
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
// EphemeralRunners or not. An unanswered check changes nothing.
func (e *EphemeralRunners) check(ctx context.Context, log logr.Logger) {
	served, err := e.served(ctx)
	if err != nil {
		log.Error(err, "cannot tell whether ARC's EphemeralRunners are served; the watch stays as it is")
		return
	}
	watching := e.current() != nil
	switch {
	case served && !watching:
		if err := e.startInformer(ctx); err != nil {
			log.Error(err, "cannot watch ARC's EphemeralRunners; ARC scale-set runners are taken as busy until the next check")
			return
		}
		ephemeralRunnersWatched.Set(1)
		e.degradedSaid = false
		log.Info("ARC's EphemeralRunners are served: watching them, so ARC scale-set runners are judged by their job")
	case !served && watching:
		e.stopInformer()
		ephemeralRunnersWatched.Set(0)
		e.degradedSaid = true
		log.Info("ARC's EphemeralRunners are no longer served: stopped watching them; ARC scale-set runners are taken as busy (degraded) until they are served again")
	case !served && !e.degradedSaid:
		ephemeralRunnersWatched.Set(0)
		e.degradedSaid = true
		log.Info("ARC's EphemeralRunners are not served (ARC's CRDs are not installed): ARC scale-set runners are taken as busy (degraded) until they are; checked every " + e.every.String())
	}
}

// startInformer runs a new informer of EphemeralRunners whose changes go
// to the marker.
func (e *EphemeralRunners) startInformer(ctx context.Context) error {
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
		if er, ok := obj.(*unstructured.Unstructured); ok {
			e.jobs.keep(er)
		}
		send(obj)
	}
	gone := func(obj any) {
		if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if er, ok := obj.(*unstructured.Unstructured); ok {
			e.jobs.drop(er)
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
		// Synced, the watch has seen every EphemeralRunner since now.
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
func (e *EphemeralRunners) stopInformer() {
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
func (e *EphemeralRunners) current() toolscache.SharedIndexInformer {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.informer
}

// Watching reports whether the EphemeralRunners are watched now.
func (e *EphemeralRunners) Watching() bool { return e.current() != nil }

// NeedLeaderElection: only the leader marks.
func (e *EphemeralRunners) NeedLeaderElection() bool { return true }

// Get is the EphemeralRunner named key, or nil.
func (e *EphemeralRunners) Get(key types.NamespacedName) *unstructured.Unstructured {
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
