package recorder

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// JobsOver asks the CI service of each runner the marker holds busy, now
// and then, whether the runner's job has ended (notify.JobAsker), and
// tells the marker of a runner whose job ended long ago: a zombie
// (runnerpod.JobOverZombie) that no fleet object shows. It asks off the
// marker's path, which reads only its answers; it runs on the leader,
// where reports go to GitHub or GitLab, whose credentials it asks with.
type JobsOver struct {
	Reports config.Reports
	// Askers ask each destination (notify.Senders' GitHub and GitLab).
	Askers map[string]notify.JobAsker
	// Job is the job a death of pod would name (Watcher.JobOf), which
	// the service is asked about under the reports' trust.
	Job func(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) *v1alpha1.Job
	// Every is how often a held runner is asked about; Grace how long
	// after its job's end a runner still running is a zombie.
	Every, Grace time.Duration
	// PerSecond bounds the asks across the fleet, which share the
	// service's rate limit with the reports.
	PerSecond float64
	Now       func() time.Time

	// found has the marker judge a pod again (set by the marker).
	found func(types.NamespacedName)

	mu   sync.Mutex
	held map[types.NamespacedName]heldRunner
	// over and asked are by pod, for the pod of that UID: what the service
	// said, and when it was last asked.
	over    map[types.NamespacedName]overEntry
	asked   map[types.NamespacedName]askedEntry
	limiter *rate.Limiter
	// resume is when a service that asked for a wait (a rate limit) is
	// asked again.
	resume time.Time
}

type overEntry struct {
	uid types.UID
	z   runnerpod.Zombie
}

type askedEntry struct {
	uid types.UID
	at  time.Time
}

// heldRunner is a runner pod the marker holds busy, as last judged.
type heldRunner struct {
	pod    *corev1.Pod
	runner runnerpod.Runner
}

// Hold notes whether the marker holds pod, a runner of runner, busy: only
// those are asked about.
func (o *JobsOver) Hold(pod *corev1.Pod, runner runnerpod.Runner, busy bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if !busy || pod.DeletionTimestamp != nil {
		delete(o.held, key)
		return
	}
	if o.held == nil {
		o.held = map[types.NamespacedName]heldRunner{}
	}
	o.held[key] = heldRunner{pod: pod, runner: runner}
}

// Of is the zombie the service's answer made of pod, if any.
func (o *JobsOver) Of(pod *corev1.Pod) (runnerpod.Zombie, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.over[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}]
	return e.z, ok && e.uid == pod.UID
}

// NeedLeaderElection: the leader asks, as it names zombies.
func (o *JobsOver) NeedLeaderElection() bool { return true }

// askTimeout bounds one ask, so that a service that never answers holds
// up no other runner's.
const askTimeout = 30 * time.Second

// Start asks about the held runners until ctx ends: a round a tenth of
// Every apart, each asking, at the limiter's pace, every runner not asked
// within Every, the longest unasked first.
func (o *JobsOver) Start(ctx context.Context) error {
	o.limiter = rate.NewLimiter(rate.Limit(o.PerSecond), 1)
	t := time.NewTicker(max(o.Every/10, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			o.round(ctx)
		}
	}
}

// due are the held runners not asked about within Every, and not already
// found over, the longest unasked (never asked) first.
func (o *JobsOver) due(now time.Time) []heldRunner {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []heldRunner
	last := map[types.NamespacedName]time.Time{}
	for key, h := range o.held {
		if e, done := o.over[key]; done && e.uid == h.pod.UID {
			continue
		}
		if a, ok := o.asked[key]; ok && a.uid == h.pod.UID {
			if now.Sub(a.at) < o.Every {
				continue
			}
			last[key] = a.at
		}
		if _, named := runnerpod.ZombieOf(h.pod); named {
			delete(o.held, key)
			continue
		}
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b heldRunner) int {
		return last[types.NamespacedName{Namespace: a.pod.Namespace, Name: a.pod.Name}].Compare(last[types.NamespacedName{Namespace: b.pod.Namespace, Name: b.pod.Name}])
	})
	return out
}

// round asks about each due runner, at the limiter's pace; a runner with
// no job its reports trust costs the service nothing.
func (o *JobsOver) round(ctx context.Context) {
	for _, h := range o.due(o.Now()) {
		o.mu.Lock()
		waiting := o.Now().Before(o.resume)
		o.mu.Unlock()
		if ctx.Err() != nil || waiting {
			return
		}
		o.ask(ctx, h)
	}
}

// ask asks the service of h's job, if it has one the reports trust, and
// tells the marker when the answer makes it a zombie.
func (o *JobsOver) ask(ctx context.Context, h heldRunner) {
	pod := h.pod
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	o.mu.Lock()
	if o.asked == nil {
		o.asked, o.over = map[types.NamespacedName]askedEntry{}, map[types.NamespacedName]overEntry{}
	}
	o.asked[key] = askedEntry{uid: pod.UID, at: o.Now()}
	o.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	rec := death.Record{Namespace: pod.Namespace, DeathRecord: v1alpha1.DeathRecord{Pod: pod.Name, UID: string(pod.UID),
		Preset: string(h.runner.Preset.Name), Job: o.Job(ctx, pod, h.runner)}}
	t, ok := notify.PlanJobAsk(rec, o.Reports)
	asker := o.Askers[t.Destination]
	if !ok || asker == nil || o.limiter.Wait(ctx) != nil {
		return
	}
	ended, over, err := asker.JobEnded(ctx, t, pod.Name)
	if err != nil {
		logf.FromContext(ctx).Info("cannot ask whether a runner's job ended", "pod", pod.Namespace+"/"+pod.Name, "destination", t.Destination, "error", err.Error())
		if f := (*notify.Failure)(nil); errors.As(err, &f) && f.After > 0 {
			o.mu.Lock()
			o.resume = o.Now().Add(f.After)
			o.mu.Unlock()
		}
		return
	}
	z, ok := notify.JobOver(ended, over, pod.CreationTimestamp.Time, o.Now(), o.Grace)
	if !ok {
		return
	}
	logf.FromContext(ctx).Info("the runner's job ended, its service says, while the runner still runs", "pod", key, "destination", t.Destination, "ended", ended)
	o.mu.Lock()
	o.over[key] = overEntry{uid: pod.UID, z: z}
	o.mu.Unlock()
	if o.found != nil {
		o.found(key)
	}
}

// forget drops what is kept of a pod gone (nil o: nothing is).
func (o *JobsOver) forget(key types.NamespacedName) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.held, key)
	delete(o.over, key)
	delete(o.asked, key)
}

// holdForOver tells Over whether pod is held busy, so its job is asked
// about while it is.
func (m *Marker) holdForOver(pod *corev1.Pod, j Judgement) {
	if m.Over == nil {
		return
	}
	runner, ok := presets.Match(pod, m.Config.Presets)
	m.Over.Hold(pod, runner, ok && j.Busy && j.Zombie == nil)
}

// judgeAgain queues the pod of key to be judged again.
func (m *Marker) judgeAgain(key types.NamespacedName) {
	pod := runnerpod.Meta()
	pod.Namespace, pod.Name = key.Namespace, key.Name
	m.again <- event.TypedGenericEvent[client.Object]{Object: pod}
}
