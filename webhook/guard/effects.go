package guard

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// writing is what a review's side effects write beyond its log line and
// metric: any (an Event, a note or the runner label, which the review's pod
// must be confirmed for), a note of a running runner's admitted deletion
// (running), the runner label on an admitted deletion of a runner pod the
// watcher does not see (unlabelled).
type writing struct{ any, running, unlabelled bool }

// writes is what the review's side effects write. A dry run gets the same
// answer and writes nothing; nor does a pod that is no runner's, or is
// already terminating.
func (h *Handler) writes(f Facts, d Decision, rv review) writing {
	if rv.dryRun || d.Rule == runnerpod.RuleNotRunnerPod || d.Rule == runnerpod.RuleTerminating {
		return writing{}
	}
	w := writing{running: d.Allowed && d.Status.State == runnerpod.Running}
	// A runner pod the injector never saw is out of the pod watcher's view
	// until labelled, whatever its runner's state: its delete is sent here
	// (matchConditions) so it is labelled before it goes and its death,
	// an OOM before its fleet removes it, is still recorded.
	_, labelled := f.Pod.Labels[runnerpod.RunnerLabel]
	w.unlabelled = d.Allowed && !labelled && h.Writer != nil
	w.any = !d.Allowed || d.Rule == runnerpod.RuleOverride || d.Rule == runnerpod.RuleNodeDrain || d.Rule == runnerpod.RuleProtectionExpired || w.running || w.unlabelled
	return w
}

// sideEffects logs the decision, emits Events and notes an admitted
// deletion of a running runner for the pod watcher, as w (writes) says,
// after the answer (AnswerFirst) unless it labels the pod. A dry run gets the
// same answer and none of them; so does a review whose pod does not exist
// with the review's UID, which the API server did not send.
func (h *Handler) sideEffects(ctx context.Context, f Facts, d Decision, rv review, w writing) {
	log := logf.FromContext(ctx).WithValues("operation", f.Operation, "rule", d.Rule, "requester", f.Requester, "dryRun", rv.dryRun)
	if why := h.unsent(ctx, f); why != "" {
		log.Info(notActedOn, "why", why, "pod", f.Pod.Namespace+"/"+f.Pod.Name)
		return
	}
	decisions.WithLabelValues(string(f.Operation), decisionLabel(d), string(d.Rule), requesterClass(f.Requester)).Inc()
	if d.OwnerNotTaken != "" && (!d.Allowed || d.Warned) {
		ownersNotTaken.WithLabelValues(string(d.Runner.Preset.Name), string(f.Operation), decisionLabel(d)).Inc()
	}
	switch d.Rule {
	case runnerpod.RuleNotRunnerPod, runnerpod.RuleTerminating:
		log.V(2).Info("allowed", "reason", d.Message)
		return
	case runnerpod.RuleJobOwner, runnerpod.RuleExempt, runnerpod.RuleOverride, runnerpod.RuleNodeDrain, runnerpod.RuleProtectionExpired, runnerpod.RuleBusy, runnerpod.RuleJobOver, runnerpod.RuleOwnerUnknown:
		// The contract's "allow, and log" rows and every refusal: an
		// operator sees them at the default level.
		log.Info("decided", "allowed", d.Allowed, "reason", d.Message, "preset", d.Runner.Preset.Name, "overrideReason", d.Override)
	default:
		log.V(1).Info("decided", "allowed", d.Allowed, "reason", d.Message, "preset", d.Runner.Preset.Name)
	}
	if !w.any {
		return
	}
	if ok, err := h.confirm(ctx, f); !ok {
		log.Info("no Event or note: the pod does not exist with the review's UID, or its deletion had begun", "pod", f.Pod.Namespace+"/"+f.Pod.Name, "uid", f.Pod.UID, "error", err)
		return
	}
	pod := f.Pod
	// Who deleted the EphemeralRunner: the refusal names them, and a delete
	// once the job is over completes what they started.
	var startedBy string
	if !d.Allowed && d.OwnerDeleting || w.running && (d.Rule == runnerpod.RuleJobOver || d.Rule == runnerpod.RuleIdle && d.OwnerDeleting) {
		startedBy = h.ownerDeleter(ctx, pod)
	}
	h.event(f, d, startedBy)
	if w.running && h.Writer != nil {
		h.note(ctx, f, d, startedBy)
	}
	if w.unlabelled {
		// Before the answer (Handle): the watcher's cache must hold the
		// pod before the deletion removes it.
		if err := fleet.Label(ctx, h.Writer, f.Pod); err != nil {
			log.Error(err, "labelling the runner pod for the pod watcher")
		}
	}
}

// event emits the Event of a decision an operator should see (eventOf
// words it).
func (h *Handler) event(f Facts, d Decision, startedBy string) {
	if e, ok := eventOf(f, d, startedBy); ok {
		h.Recorder.Eventf(f.Pod, nil, e.Type, e.Reason, string(f.Operation), "%s", e.Note)
	}
}

// ownerDeleter is who asked for the deletion of the pod's EphemeralRunner,
// as the guard noted it; "" when no note says. Read only when the
// EphemeralRunner is being deleted and the guard refuses the pod's delete
// or notes it: the note was written when the EphemeralRunner's deletion
// began, well before ARC could act on it.
func (h *Handler) ownerDeleter(ctx context.Context, pod *corev1.Pod) string {
	ref := runnerpod.EphemeralRunnerRef(pod)
	n := &v1alpha1.RunnerDeletion{}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: string(ref.UID)}, n); err != nil {
		logf.FromContext(ctx).V(1).Info("no note of the EphemeralRunner's deletion", "ephemeralRunner", ref.Name, "error", err.Error())
		return ""
	}
	// The note is named after the UID, which the pod's owner reference
	// fixes; a note of another kind under that name says nothing of it.
	if n.Deletion.Kind != runnerpod.EphemeralRunnerKind || n.Deletion.UID != string(ref.UID) {
		return ""
	}
	return n.Deletion.Requester
}

// note hands the note of an admitted deletion of a running runner to
// Notes: who asked, by which rule, who started it, the job the fleet named.
func (h *Handler) note(ctx context.Context, f Facts, d Decision, startedBy string) {
	n := deletion.New(f.Pod, f.Requester, string(f.Operation), string(d.Rule), f.Now)
	n.Deletion.StartedBy = startedBy
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
	// Written once the deletion has happened, so a review the API server
	// did not send, of a pod nobody deletes, leaves no note to pre-empt
	// the real one.
	h.Notes.WriteWhen(ctx, n, h.podDeleted(n))
}
