package guard

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Effect is one thing a judged review leads to beyond its answer, as data:
// Handle judges a review into an answer and its effects (judged), and the
// runner (after.go) carries them out, in order, once the whole answer is
// sent. An effect is carried out only for a review the API server can have
// sent (forged.go), and a count or a write only once the review's pod is
// confirmed and the review is no dry run.
type Effect interface {
	// carryOut does it. startedBy is who started the deletion, where a
	// write asked for it to be read (namesStarter).
	carryOut(ctx context.Context, h *Handler, startedBy string)
}

// The kinds of effect a judged review may lead to, in the order they are
// carried out: each gives its effect, or nil when the review leads to none
// of its kind. A new kind is one entry in one of these lists (and the type
// that carries it out): told are carried out for every review the API
// server can have sent; counted and written also need the review's pod
// confirmed, and a review that is no dry run. A count feeds alerts
// (a drain waiting, a reaper refused), so a review that was not sent, or
// not carried out, moves none.
var (
	toldKinds    = []func(j *judged) Effect{decisionLogOf}
	countedKinds = []func(j *judged) Effect{decisionMetricOf}
	writtenKinds = []func(j *judged) Effect{eventEffectOf, noteEffectOf, refusalOnRecordOf}
)

// effectsOf lists the effects of kinds that j leads to.
func effectsOf(j *judged, kinds []func(j *judged) Effect) []Effect {
	var out []Effect
	for _, kind := range kinds {
		if e := kind(j); e != nil {
			out = append(out, e)
		}
	}
	return out
}

// writing is what a review's effects count and write beyond its log line:
// counted (the decision's metric), any (an Event, a note or the runner
// label), both only once the review's pod is confirmed; a note of a
// running runner's admitted deletion (running), the runner label on an
// admitted deletion of a runner pod the watcher does not see (unlabelled).
type writing struct{ counted, any, running, unlabelled bool }

// writes is what the review's effects count and write. A dry run gets the
// same answer and counts and writes nothing; nor does a review of a pod
// already terminating (a second review of one deletion, or a replay). A
// pod that is no runner's is counted, and nothing is written about it.
func (h *Handler) writes(f Facts, d Decision, rv review) writing {
	if rv.dryRun || d.Rule == runnerpod.RuleTerminating {
		return writing{}
	}
	if d.Rule == runnerpod.RuleNotRunnerPod {
		return writing{counted: true}
	}
	w := writing{running: d.Allowed && d.Status.State == runnerpod.Running}
	// A runner pod the injector never saw is out of the pod watcher's view
	// until labelled, whatever its runner's state: its delete is sent here
	// (matchConditions) so it is labelled before it goes and its death,
	// an OOM before its fleet removes it, is still recorded.
	_, labelled := f.Pod.Labels[runnerpod.RunnerLabel]
	w.unlabelled = d.Allowed && !labelled && h.Writer != nil
	w.any = !d.Allowed || d.Rule == runnerpod.RuleOverride || d.Rule == runnerpod.RuleNodeDrain || d.Rule == runnerpod.RuleProtectionExpired || w.running || w.unlabelled
	w.counted = true
	return w
}

// decisionLog is the decision's log line.
type decisionLog struct {
	f  Facts
	d  Decision
	rv review
}

func decisionLogOf(j *judged) Effect { return decisionLog{j.f, j.d, j.rv} }

func (e decisionLog) carryOut(ctx context.Context, _ *Handler, _ string) {
	f, d := e.f, e.d
	log := logf.FromContext(ctx).WithValues("operation", f.Operation, "rule", d.Rule, "requester", f.Requester, "dryRun", e.rv.dryRun)
	switch d.Rule {
	case runnerpod.RuleNotRunnerPod, runnerpod.RuleTerminating:
		log.V(2).Info("allowed", "reason", d.Message)
	case runnerpod.RuleJobOwner, runnerpod.RuleExempt, runnerpod.RuleOverride, runnerpod.RuleNodeDrain, runnerpod.RuleProtectionExpired, runnerpod.RuleBusy, runnerpod.RuleJobOver, runnerpod.RuleOwnerUnknown:
		// The contract's "allow, and log" rows and every refusal: an
		// operator sees them at the default level.
		log.Info("decided", "allowed", d.Allowed, "reason", d.Message, "preset", d.Runner.Preset.Name, "overrideReason", d.Override)
	default:
		log.V(1).Info("decided", "allowed", d.Allowed, "reason", d.Message, "preset", d.Runner.Preset.Name)
	}
}

// eventEffect is the Event of a decision an operator should see (eventOf
// words it).
type eventEffect struct {
	f Facts
	d Decision
}

func eventEffectOf(j *judged) Effect {
	if _, ok := eventOf(j.f, j.d, ""); !ok {
		return nil
	}
	return eventEffect{j.f, j.d}
}

func (e eventEffect) carryOut(_ context.Context, h *Handler, startedBy string) {
	if ev, ok := eventOf(e.f, e.d, startedBy); ok {
		h.Recorder.Eventf(regarding(e.f.Pod), nil, ev.Type, ev.Reason, string(e.f.Operation), "%s", ev.Note)
	}
}

// noteEffect is the note of an admitted deletion of a running runner:
// who asked, by which rule, the job the fleet named; who started it is
// added when carried out.
type noteEffect struct{ n *v1alpha1.RunnerDeletion }

func noteEffectOf(j *judged) Effect {
	if !j.w.running || !j.noting {
		return nil
	}
	f, d := j.f, j.d
	n := deletion.New(f.Pod, f.Requester, string(f.Operation), string(d.Rule), f.Now)
	n.Deletion.Job = d.Named
	if d.Rule == runnerpod.RuleOverride {
		n.Deletion.Reason = d.Override
		if len(n.Deletion.Reason) > deletion.MaxReason {
			n.Deletion.Reason = strings.ToValidUTF8(n.Deletion.Reason[:deletion.MaxReason], "")
		}
	}
	if d.Rule == runnerpod.RuleNodeDrain {
		// The deadline's setter started what this deletion carries out.
		n.Deletion.StartedBy = d.NodeDrain.By
	}
	return noteEffect{n}
}

// carryOut writes the note once the deletion has happened, so a review
// the API server did not send, of a pod nobody deletes, leaves no note to
// pre-empt the real one.
func (e noteEffect) carryOut(ctx context.Context, h *Handler, startedBy string) {
	n := e.n.DeepCopy()
	if n.Deletion.Rule != string(runnerpod.RuleNodeDrain) {
		n.Deletion.StartedBy = startedBy
	}
	h.Notes.Write(ctx, n, h.podDeleted(n))
}

// namesStarter: who deleted the pod's EphemeralRunner is read for j's
// writes. The refusal names them, and a delete once the job is over
// completes what they started.
func (j *judged) namesStarter() bool {
	d, w := j.d, j.w
	return !d.Allowed && d.OwnerDeleting || w.running && (d.Rule == runnerpod.RuleJobOver || d.Rule == runnerpod.RuleIdle && d.OwnerDeleting)
}

// ownerDeleter is who asked for the deletion of the fleet's record of the
// pod (ARC's EphemeralRunner), as the guard noted it; "" when no note
// says. Read only when the record is being deleted and the guard refuses
// the pod's delete or notes it, after this review's answer:
// deletion.OwnerNote waits for the note, which ARC's finalizer can outrun.
func (h *Handler) ownerDeleter(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) string {
	ref := presets.RecordRef(runner, pod)
	n, err := deletion.OwnerNote(ctx, h.Reader, pod.Namespace, ref, deletion.OwnerNoteWait)
	if n == nil {
		logf.FromContext(ctx).V(1).Info("no note of the deletion of the fleet's record", "record", ref.Kind+"/"+ref.Name, "error", err)
		return ""
	}
	return n.Requester
}

// refusalOnRecord keeps a refusal on the runner's pod (refusal.Writer),
// where it outlives the Event and goes onto the runner's record.
type refusalOnRecord struct {
	f Facts
	d Decision
}

func refusalOnRecordOf(j *judged) Effect {
	if j.d.Allowed {
		return nil
	}
	return refusalOnRecord{j.f, j.d}
}

func (e refusalOnRecord) carryOut(ctx context.Context, h *Handler, _ string) {
	h.Refusals.Note(ctx, client.ObjectKeyFromObject(e.f.Pod), e.f.Pod.UID, refusalOf(e.f, e.d))
}

// refusalOf is what a refusal keeps: who asked, what, by which rule, when,
// and the pod's version it was judged on.
func refusalOf(f Facts, d Decision) refusal.One {
	return refusal.One{By: f.Requester, Verb: string(f.Operation), Rule: string(d.Rule), At: f.Now, Version: f.Pod.ResourceVersion, Warned: d.Warned}
}

// regarding is the pod as an Event names it: without its resourceVersion,
// which the events API's series key would otherwise hold, so that a
// reaper's retries on a pod whose version moves (each refusal kept on it
// moves it) are one series, not an Event object each.
func regarding(pod *corev1.Pod) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
}
