package recorder

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/namespace"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Facts are what the marker judges a runner pod by, beyond the pod itself.
// A new input to the judgement (a node's drain deadline, say) joins them
// as a field and is read in Judge alone.
type Facts struct {
	// Selected: the pod's namespace is one the webhooks act in. Outside
	// them runnerguard keeps no mark and no budget.
	Selected bool
	// Enforce: the namespace is in enforce mode, as the webhook
	// registrations select it.
	Enforce bool
	// Released: the operator switched the guard off in the namespace
	// (Modes): runnerguard keeps no budget and no busy mark there.
	Released bool
	// Job is the fleet's job signal (runnerpod.JobNotRead where the preset
	// keeps no record).
	Job runnerpod.JobSignal
	// Node is the metadata of the pod's node (nil: not scheduled, or not
	// read): its drain deadline frees a busy runner as the guard does.
	Node *corev1.Node
	// Zombie is what the fleet's evidence says the runner is, if a zombie
	// (presets.ZombieOf), for the leader to name; the marks follow the
	// pod's own ZombieAnnotation once named.
	Zombie *runnerpod.Zombie
	Now    time.Time
}

// Judgement is what the marker keeps a runner pod's marks and budget to.
type Judgement struct {
	// Judged: a runner pod of a selected namespace. Its marks say busy or
	// not; an unjudged pod keeps none of runnerguard's.
	Judged bool
	presets.Protection
	// Budget: the API server should hold the pod's eviction by a
	// PodDisruptionBudget (busy, in an enforce namespace).
	Budget bool
	// Zombie is the zombie the fleet's evidence shows and the pod does not
	// carry yet: the leader names it (Zombies).
	Zombie *runnerpod.Zombie
}

// Judge is the marker's judgement of pod, a runner pod of runner: the
// guard's pod-level rules (presets.Protected) in the facts' namespace.
func Judge(pod *corev1.Pod, runner runnerpod.Runner, f Facts) Judgement {
	j, _ := JudgeWhy(pod, runner, f)
	return j
}

// JudgeWhy is Judge and, for a runner it finds not busy, why, as a person
// reads it: the eviction responder tells a drainer why it let one go.
func JudgeWhy(pod *corev1.Pod, runner runnerpod.Runner, f Facts) (Judgement, string) {
	if !f.Selected {
		return Judgement{}, "its namespace is not one runnerguard protects"
	}
	var unnamed *runnerpod.Zombie
	if _, named := runnerpod.ZombieOf(pod); f.Zombie != nil && !named {
		unnamed = f.Zombie
	}
	if f.Released {
		// Judged, and not busy: its marks let the autoscalers take it.
		return Judgement{Judged: true, Zombie: unnamed}, "the guard is switched off in its namespace"
	}
	p, why := presets.ProtectedWhy(pod, runner, f.Job, f.Now)
	if d, ok := runnerpod.NodeDrainFor(f.Node, pod); ok && p.Busy {
		// The guard lets the runner go at its node's drain deadline
		// (rule node-drain-deadline): so do its marks and budget, or a
		// platform's own drain would still be held by the budget.
		if _, passed := runnerpod.NodeDrainPassed(f.Node, pod, f.Now); passed {
			p = presets.Protection{}
			why = fmt.Sprintf("its node's drain deadline (%s %s, set by %s) has passed", runnerpod.DrainDeadline, d.At.UTC().Format(time.RFC3339), d.By)
		} else if p.Until.IsZero() || d.At.Before(p.Until) {
			p.Until = d.At
		}
	}
	return Judgement{Judged: true, Protection: p, Budget: p.Busy && f.Enforce, Zombie: unnamed}, why
}

// markValues are the marks config turns on and the value each should have
// on pod now; a key absent should not be there.
func markValues(pod *corev1.Pod, j Judgement, c config.Marks) map[string]string {
	want := map[string]string{}
	if !j.Judged {
		return want
	}
	if c.Karpenter && j.Busy {
		want[runnerpod.KarpenterDoNotDisrupt] = karpenterValue(pod, j.Until, c.KarpenterDuration)
	}
	if c.ClusterAutoscaler {
		want[runnerpod.ClusterAutoscalerSafeEvict] = fmt.Sprint(!j.Busy)
		if v := injectedVolumes(pod); v != "" {
			want[runnerpod.ClusterAutoscalerLocalVolumes] = v
		}
	}
	return want
}

// karpenterValue is do-not-disrupt's value: "true", or with duration the
// protection's end as Karpenter reads a duration (from the pod's start,
// whole seconds rounded up), so Karpenter lets the node go at the cap
// without runnerguard. "true" where either end is not known.
func karpenterValue(pod *corev1.Pod, until time.Time, duration bool) string {
	if !duration || until.IsZero() || pod.Status.StartTime == nil {
		return "true"
	}
	secs := math.Ceil(until.Sub(pod.Status.StartTime.Time).Seconds())
	if secs < 1 {
		return "true"
	}
	return fmt.Sprintf("%.0fs", secs)
}

// injectedVolumes is the injector's volumes the pod has, comma-separated.
func injectedVolumes(pod *corev1.Pod) string {
	if !slices.ContainsFunc(pod.Spec.InitContainers, func(c corev1.Container) bool { return c.Name == runnerpod.VitalsContainer }) {
		return ""
	}
	return runnerpod.CgroupVolume + "," + runnerpod.VitalsVolume
}

// allMarks are the marks the marker may own, in the order Marked lists them.
var allMarks = []string{runnerpod.KarpenterDoNotDisrupt, runnerpod.ClusterAutoscalerSafeEvict, runnerpod.ClusterAutoscalerLocalVolumes}

// MarkPlan is the annotations patch that makes pod's marks follow its
// judgement: a key's new value, or nil to remove it; nil when the pod's
// marks are already what they should be.
//
// Each mark config turns on is kept at its value (do-not-disrupt while
// busy; safe-to-evict "false" while busy and "true" while idle or done;
// the injected volumes named while judged); one it turns off is removed.
// Only a mark runnerguard set, which runnerpod.Marked lists, is ever
// changed: a mark the pod came with, or that someone else wrote, is its
// author's (do-not-disrupt "false": never hold a node for me; "true":
// always) and is left as it is.
func MarkPlan(pod *corev1.Pod, j Judgement, c config.Marks) map[string]*string {
	a := pod.Annotations
	owned := strings.Split(a[runnerpod.Marked], ",")
	want := markValues(pod, j, c)
	patch := map[string]*string{}
	var nowOwned []string
	for _, key := range allMarks {
		have, present := a[key]
		value, on := want[key]
		switch {
		case present && !slices.Contains(owned, key):
			// The author's.
		case on:
			if !present || have != value {
				patch[key] = &value
			}
			nowOwned = append(nowOwned, key)
		case present:
			patch[key] = nil
		}
	}
	if joined := strings.Join(nowOwned, ","); joined != a[runnerpod.Marked] {
		if joined == "" {
			patch[runnerpod.Marked] = nil
		} else {
			patch[runnerpod.Marked] = &joined
		}
	}
	if len(patch) == 0 {
		return nil
	}
	return patch
}

// factsIn is what the marker judges pod by, its namespace read through
// ns: the pod's runner and the Facts; ok false for a pod of no preset or
// of a namespace gone, known false while the namespace's mode is not.
func (m *Marker) factsIn(ctx context.Context, pod *corev1.Pod, ns client.Reader) (runner runnerpod.Runner, f Facts, ok, known bool, err error) {
	nsLabels, err := namespace.Labels(ctx, ns, nil, pod.Namespace)
	if err != nil {
		return runner, f, false, true, client.IgnoreNotFound(err)
	}
	runner, ok = presets.Match(pod, m.Config.Presets)
	if !ok {
		return runner, f, false, true, nil
	}
	node, err := m.node(ctx, pod)
	if err != nil {
		return runner, f, false, true, err
	}
	f = Facts{Selected: m.Namespaces.Matches(labels.Set(nsLabels)), Job: runnerpod.JobNotRead, Node: node, Now: m.Now()}
	known = true
	if m.Modes != nil {
		f.Enforce, known, f.Released = m.Modes.Enforce(nsLabels)
	}
	var rec *unstructured.Unstructured
	if k, ok := presets.Keeper(runner); ok {
		if ref := k.RecordRef(pod); ref.Name != "" {
			// As the guard reads it: a record not in the cache (or none
			// watched: no CRD) is unreadable, which is busy.
			if r := m.records[runner.Preset.Name]; r != nil {
				rec = r.Get(types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name})
			}
			f.Job = fleet.Judge(k, rec, pod)
		}
	}
	if z, ok := presets.ZombieOf(pod, runner, rec); ok {
		f.Zombie = &z
	} else if m.Over != nil {
		if z, ok := m.Over.Of(pod); ok {
			f.Zombie = &z
		}
	}
	return runner, f, true, known, nil
}

// judge is the marker's judgement of pod now, for any requester the guard
// does not exempt; known false while the namespace's mode is not.
func (m *Marker) judge(ctx context.Context, pod *corev1.Pod) (Judgement, bool, error) {
	return m.judgeIn(ctx, pod, m.Client)
}

// judgeIn is judge with the pod's namespace read through ns.
func (m *Marker) judgeIn(ctx context.Context, pod *corev1.Pod, ns client.Reader) (Judgement, bool, error) {
	runner, f, ok, known, err := m.factsIn(ctx, pod, ns)
	if err != nil || !ok {
		return Judgement{}, true, err
	}
	return Judge(pod, runner, f), known, nil
}
