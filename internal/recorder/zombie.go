package recorder

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// zombieAnnotations are what the pod cache keeps of a zombie: the
// leader's word, which the marks and the death record read.
var zombieAnnotations = []string{runnerpod.ZombieAnnotation}

// ReasonZombie is the Warning Event of a runner pod named a zombie.
const ReasonZombie = "RunnerZombie"

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
	// events bounds the Events of a fleet-wide wave of zombies (a spot
	// pool's eviction) so they cannot swamp the API server.
	events *rate.Limiter
}

// name writes z on pod unless it carries a zombie already (the first word
// stays: a zombie's kind and start do not change), raises its Event and
// counts it; the pod's update judges its marks again. A pod gone meanwhile
// is left alone.
func (zs *Zombies) name(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner, z runnerpod.Zombie) error {
	if _, named := runnerpod.ZombieOf(pod); named {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID,
		"annotations": map[string]string{runnerpod.ZombieAnnotation: z.Value()}}})
	if err != nil {
		return err
	}
	target := runnerpod.Meta()
	target.Namespace, target.Name = pod.Namespace, pod.Name
	if err := zs.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body)); err != nil {
		return client.IgnoreNotFound(err)
	}
	zombiesNamed.WithLabelValues(pod.Namespace, z.Kind).Inc()
	logf.FromContext(ctx).Info("runner pod named a zombie", "pod", client.ObjectKeyFromObject(pod), "kind", z.Kind, "since", z.Since)
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
