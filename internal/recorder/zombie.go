package recorder

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// zombieAnnotations are what the pod cache keeps of a zombie: the
// leader's word, which the marks and the death record read.
var zombieAnnotations = []string{runnerpod.ZombieAnnotation}

// ReasonZombie is the Warning Event of a runner pod named a zombie;
// ReasonZombieEnded the Normal Event of one the leader ended itself
// (guard.endZombiesAfter).
const (
	ReasonZombie      = "RunnerZombie"
	ReasonZombieEnded = "RunnerZombieEnded"
)

var (
	zombiesNamed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runnerguard_zombies_named_total",
		Help: "Runner pods the leader named zombies (alive, but their fleet's objects show they will never run a job), by namespace and kind: each once.",
	}, []string{"namespace", "kind"})
	zombiesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "runnerguard_runner_pods_zombie",
		Help: "Runner pods that are zombies now, by namespace and kind: no longer held by runnerguard, but holding their node and their fleet's capacity until someone ends them.",
	}, []string{"namespace", "kind"})
)

// Zombies names the zombies among runner pods: the leader's one writer of
// runnerpod.ZombieAnnotation, its Event and its metrics. Its zero value
// is ready once Recorder and Client are set.
type Zombies struct {
	Client   client.Client
	Recorder events.EventRecorder

	mu sync.Mutex
	// now holds each zombie pod seen, by its kind, for the gauge.
	now map[types.NamespacedName]string
	// named holds the pods named (the UID of the pod of that name), so a
	// cache that does not show the name yet never names one twice.
	named map[types.NamespacedName]types.UID
	// ended holds the pods whose end the leader asked for (the UID of
	// the pod of that name), so it asks once.
	ended map[types.NamespacedName]types.UID
	// events bounds the Events of a fleet-wide wave of zombies (a spot
	// pool's eviction) so they cannot swamp the API server.
	events *rate.Limiter
}

// name writes z on pod unless it carries a zombie already (the first word
// stays: a zombie's kind and start do not change), raises its Event and
// counts it; the pod's update judges its marks again. A pod gone meanwhile
// is left alone.
func (zs *Zombies) name(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner, z runnerpod.Zombie) error {
	key := client.ObjectKeyFromObject(pod)
	zs.mu.Lock()
	told := zs.named[key] == pod.UID
	zs.mu.Unlock()
	if _, named := runnerpod.ZombieOf(pod); named || told {
		// Named already, though the cache may not show it yet.
		return nil
	}
	meta := map[string]any{"annotations": map[string]string{runnerpod.ZombieAnnotation: z.Value()}}
	if err := patchPodMeta(ctx, zs.Client, pod, meta); err != nil {
		return client.IgnoreNotFound(err)
	}
	zs.mu.Lock()
	if zs.named == nil {
		zs.named = map[types.NamespacedName]types.UID{}
	}
	zs.named[key] = pod.UID
	zs.mu.Unlock()
	zombiesNamed.WithLabelValues(pod.Namespace, z.Kind).Inc()
	logf.FromContext(ctx).Info("runner pod named a zombie", "pod", key, "kind", z.Kind, "since", z.Since)
	if zs.Recorder != nil && zs.allowEvent(time.Now()) {
		zs.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, ReasonZombie, "Zombie", "%s", presets.ZombieNote(runner, z))
	}
	return nil
}

func (zs *Zombies) allowEvent(t time.Time) bool {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	if zs.events == nil {
		zs.events = rate.NewLimiter(rate.Every(time.Second), 50)
	}
	return zs.events.AllowN(t, 1)
}

// seen notes what pod (nil: gone) now says of its zombie, for the gauge.
func (zs *Zombies) seen(key types.NamespacedName, pod *corev1.Pod) {
	kind := ""
	if pod != nil {
		if z, ok := runnerpod.ZombieOf(pod); ok && pod.DeletionTimestamp == nil {
			kind = z.Kind
		}
	}
	zs.mu.Lock()
	defer zs.mu.Unlock()
	if pod == nil {
		delete(zs.ended, key)
		delete(zs.named, key)
	}
	if zs.now == nil {
		zs.now = map[types.NamespacedName]string{}
	}
	was := zs.now[key]
	if was == kind {
		return
	}
	if kind == "" {
		delete(zs.now, key)
	} else {
		zs.now[key] = kind
	}
	for _, k := range []string{was, kind} {
		if k != "" {
			zombiesGauge.WithLabelValues(key.Namespace, k).Set(float64(zs.countLocked(key.Namespace, k)))
		}
	}
}

func (zs *Zombies) countLocked(namespace, kind string) int {
	n := 0
	for p, k := range zs.now {
		if p.Namespace == namespace && k == kind {
			n++
		}
	}
	return n
}

// ZombieDue is when the leader ends the named zombie pod under endAfter
// (zero: never), and whether that time has come. A pod already going is
// not ended again.
func ZombieDue(pod *corev1.Pod, endAfter time.Duration, now time.Time) (time.Time, bool) {
	z, ok := runnerpod.ZombieOf(pod)
	if !ok || endAfter <= 0 || pod.DeletionTimestamp != nil {
		return time.Time{}, false
	}
	due := z.Since.Add(endAfter)
	return due, !now.Before(due)
}

// endDue ends the pod's zombie once it is due (ZombieDue), else looks
// again then, keeping the sooner look res asks for.
func (zs *Zombies) endDue(ctx context.Context, pod *corev1.Pod, cfg config.Config, now time.Time, res ctrl.Result) (ctrl.Result, error) {
	due, come := ZombieDue(pod, cfg.Guard.EndZombiesAfter.Duration, now)
	if due.IsZero() {
		return res, nil
	}
	if !come {
		if wait := due.Sub(now); res.RequeueAfter == 0 || wait < res.RequeueAfter {
			res.RequeueAfter = wait
		}
		return res, nil
	}
	runner, ok := presets.Match(pod, cfg.Presets)
	if !ok {
		return res, nil
	}
	return res, zs.end(ctx, pod, runner)
}

// end ends the zombie pod as its fleet ends one: its record deleted
// (fleet.Traits.ZombieEndedByRecord; the record's controller then removes
// the runner and its pod), else its pod evicted (the guard's rule zombie
// lets it through), once, with a Normal Event saying so.
func (zs *Zombies) end(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) error {
	key := client.ObjectKeyFromObject(pod)
	zs.mu.Lock()
	done := zs.ended[key] == pod.UID
	zs.mu.Unlock()
	if done {
		return nil
	}
	how, err := zs.endAs(ctx, pod, runner)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	zs.mu.Lock()
	if zs.ended == nil {
		zs.ended = map[types.NamespacedName]types.UID{}
	}
	zs.ended[key] = pod.UID
	zs.mu.Unlock()
	z, _ := runnerpod.ZombieOf(pod)
	logf.FromContext(ctx).Info("ended a zombie runner", "pod", key, "kind", z.Kind, "how", how)
	if zs.Recorder != nil && zs.allowEvent(time.Now()) {
		zs.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, ReasonZombieEnded, "EndZombie",
			"runnerguard ended the zombie (%s since %s) after guard.endZombiesAfter: %s", z.Kind, z.Since.UTC().Format(time.RFC3339), how)
	}
	return nil
}

// endAs asks for the zombie's end as its fleet has it, and says how.
func (zs *Zombies) endAs(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) (string, error) {
	f := presets.Of(runner)
	if k, ok := f.(fleet.RecordKeeper); ok && f.Traits().ZombieEndedByRecord {
		ref := k.RecordRef(pod)
		if ref.Name == "" {
			return "", nil
		}
		rec := &unstructured.Unstructured{}
		rec.SetGroupVersionKind(k.RecordResource().GroupVersion().WithKind(f.Traits().RecordKind))
		rec.SetNamespace(pod.Namespace)
		rec.SetName(ref.Name)
		return "deleted its " + f.Traits().RecordKind + " " + ref.Name, zs.Client.Delete(ctx, rec, client.Preconditions{UID: &ref.UID})
	}
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	return "evicted its pod", zs.Client.SubResource("eviction").Create(ctx, pod, ev)
}
