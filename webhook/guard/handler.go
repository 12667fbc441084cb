package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/deletion"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/namespace"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Handler is the guard's admission handler: it reads DELETE reviews of pods
// (the pod is the oldObject) and CREATE reviews of pods/eviction (the object
// is the Eviction, so the pod is read from the API).
type Handler struct {
	Config config.Config
	// Reader reads pods for evictions and EphemeralRunners for ARC's job
	// signal, uncached: both are rare, and a stale pod would misjudge.
	Reader client.Reader
	// Namespaces reads a namespace's labels (for its mode) from the
	// manager's cache; nil: every namespace has the configured mode.
	Namespaces client.Reader
	// Pods reads the runner pods' metadata from the cache every replica
	// keeps when the watcher runs; nil without one. A review whose pod is
	// there with the review's UID is confirmed without a GET.
	Pods client.Reader
	// Writer labels runner pods the pod watcher would miss, and Notes
	// writes through it the deletion notes the watcher reads; nil without
	// a watcher.
	Writer   client.Writer
	Notes    *deletion.Notes
	Recorder events.EventRecorder
	Now      func() time.Time
	// Selected picks the namespaces the webhooks are registered for; nil:
	// every namespace a review names. A review of a pod elsewhere was not
	// sent by the API server: the guard writes nothing about it.
	Selected labels.Selector
	// NotesAfterDeletion: a deletion note is written only once the pod's
	// deletion shows (podDeleted), so a review the API server did not send
	// leaves none.
	NotesAfterDeletion bool
	// after runs a review's side effects once it is answered; nil: before
	// the answer (NewHandler's, so a test sees them when Handle returns).
	after *afterAnswer
}

var _ admission.Handler = &Handler{}

// noteSlots bounds the deletion notes a replica writes at once after its
// answers: room for a burst of job ends on a slow API server, while the
// memory of notes held stays small.
const noteSlots = 64

// NewHandler returns a Handler reading the clock.
func NewHandler(cfg config.Config, r client.Reader, w client.Writer, rec events.EventRecorder) *Handler {
	return &Handler{Config: cfg, Reader: r, Writer: w, Notes: deletion.NewNotes(w, noteSlots, notesFailed), Recorder: rec, Now: time.Now}
}

// Handle judges one review.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if isEphemeralRunnerDelete(req) {
		return h.ephemeralRunnerDeleted(ctx, req)
	}
	facts, rv, err := h.facts(ctx, req)
	switch {
	case errors.Is(err, errBadRequest):
		return admission.Errored(http.StatusBadRequest, err)
	case errors.Is(err, errPodGone) && rv.dryRun:
		// `runnerguard check` evicts a pod that does not exist, as a dry
		// run, to learn whether the API server reaches the guard: with
		// failure policy Ignore only this warning tells an answer from a
		// failed call.
		return admission.Allowed("the pod is gone").WithWarnings(GoneWarning)
	case errors.Is(err, errPodGone):
		return admission.Allowed("the pod is gone")
	case errors.Is(err, errNotGuarded):
		return admission.Allowed("runnerguard judges only pod deletes and evictions")
	case errors.Is(err, errPodUnreadable):
		// Answer 429 so a drain retries rather than gives up on a
		// passing API error.
		logf.FromContext(ctx).Error(err, "eviction refused for now")
		return retryLater(err.Error())
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	}
	d := Decide(facts, h.Config)
	w := h.writes(facts, d, rv)
	if d.Allowed && w.any && !facts.confirmed {
		// An allowed deletion can be applied before the work after the
		// answer runs, and a pod found terminating then would pass for a
		// review sent after its deletion began (no note, no deleter on
		// record): confirm it now, while its deletion cannot have begun.
		// A refusal deletes nothing, so its confirmation waits.
		ok, err := h.confirm(ctx, facts)
		facts.confirmed, facts.refuted = ok, !ok && err == nil
	}
	if w.unlabelled {
		// The watcher's cache must hold the pod before the deletion
		// removes it: labelled before the answer.
		h.sideEffects(ctx, facts, d, rv, w)
	} else {
		h.after.later(ctx, func(ctx context.Context) { h.sideEffects(ctx, facts, d, rv, w) })
	}
	return response(facts.Operation, d)
}

// AnswerFirst has the handler answer each review before it confirms the
// review's pod and writes its Event, note, log and metric: nothing but the
// decision is on the answer's path. Through Served, that work starts once
// the whole answer is sent.
func (h *Handler) AnswerFirst() { h.after = newAfterAnswer(afterSlots) }

// Served is the guard's webhook for h, starting the work after each answer
// once the whole answer is sent (AnswerFirst).
func (h *Handler) Served() http.Handler { return h.after.Serve(&admission.Webhook{Handler: h}) }

// ServedIn is Served for the registration of mode's namespaces: the API
// server chose the mode, so the guard answers in it.
func (h *Handler) ServedIn(mode config.Mode) http.Handler {
	return h.after.Serve(&admission.Webhook{Handler: admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		return h.Handle(context.WithValue(ctx, modeKey{}, mode), req)
	})})
}

// modeKey carries the mode the registration that called chose.
type modeKey struct{}

// Wait returns once the side effects of the reviews answered so far are
// done.
func (h *Handler) Wait() { h.after.wait() }

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

// review is what the request says beyond the pod: whether it is a dry run
// and the grace period asked for (-1 when not given).
type review struct {
	dryRun bool
	grace  int64
}

// GoneWarning is the guard's warning on a dry-run eviction of a pod that
// does not exist: the proof `runnerguard check` looks for that the guard
// answered.
const GoneWarning = "runnerguard: the guard answered: the pod is gone, nothing to judge"

var (
	errBadRequest    = errors.New("malformed admission review")
	errPodGone       = errors.New("pod not found")
	errPodUnreadable = errors.New("cannot read the pod to judge its eviction")
	errNotGuarded    = errors.New("not a guarded operation")
	evictionSubres   = "eviction"
)

// facts decodes the review and gathers what Decide needs.
func (h *Handler) facts(ctx context.Context, req admission.Request) (Facts, review, error) {
	f := Facts{Requester: req.UserInfo.Username, RequesterPod: boundPod(req), RequesterCredential: runnerpod.Credential(req.UserInfo.Extra), Now: h.Now()}
	rv := review{dryRun: req.DryRun != nil && *req.DryRun, grace: -1}
	var pod *corev1.Pod
	switch {
	case req.Operation == admissionv1.Delete && req.SubResource == "":
		f.Operation = Delete
		if len(req.OldObject.Raw) == 0 {
			return f, rv, fmt.Errorf("%w: DELETE without oldObject", errBadRequest)
		}
		// A deletecollection review has no request name: the pod is in
		// oldObject either way.
		var err error
		if pod, err = decodePod(req.OldObject.Raw); err != nil {
			return f, rv, fmt.Errorf("%w: decoding oldObject as a Pod: %w", errBadRequest, err)
		}
		var o metav1.DeleteOptions
		if len(req.Options.Raw) > 0 && json.Unmarshal(req.Options.Raw, &o) == nil && o.GracePeriodSeconds != nil {
			rv.grace = *o.GracePeriodSeconds
		}
	case req.Operation == admissionv1.Create && req.SubResource == evictionSubres:
		f.Operation = Eviction
		var ev policyv1.Eviction
		if err := json.Unmarshal(req.Object.Raw, &ev); err != nil {
			return f, rv, fmt.Errorf("%w: decoding object as an Eviction: %w", errBadRequest, err)
		}
		// A server-side dry-run drain leaves request.dryRun false: the dry
		// run is only in the Eviction's deleteOptions.
		if o := ev.DeleteOptions; o != nil {
			rv.dryRun = rv.dryRun || slices.Contains(o.DryRun, metav1.DryRunAll)
			if o.GracePeriodSeconds != nil {
				rv.grace = *o.GracePeriodSeconds
			}
		}
		if req.Name == "" || req.Namespace == "" {
			return f, rv, fmt.Errorf("%w: eviction without a pod name and namespace", errBadRequest)
		}
		pod = &corev1.Pod{}
		if err := h.Reader.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, pod); err != nil {
			if apierrors.IsNotFound(err) {
				return f, rv, errPodGone
			}
			return f, rv, fmt.Errorf("%w %s/%s: %w", errPodUnreadable, req.Namespace, req.Name, err)
		}
		// Read from the API server just now: it exists with this UID.
		f.confirmed = true
	default:
		return f, rv, errNotGuarded
	}
	f.Pod = pod
	f.Mode = h.mode(ctx, pod.Namespace)
	f.LookupJob = h.lookupJob(ctx, pod)
	f.LookupNode = h.lookupNode(ctx, pod.Spec.NodeName)
	f.RequesterPodRunsJob = h.runsJob(ctx, pod.Namespace, f.RequesterPod)
	return f, rv, nil
}

// runsJob reports whether the pod named in ns is a runner pod, when
// Decide asks. A labelled runner pod is in the runner pods' cache; a pod
// the cache does not hold (a fleet manager's) runs no job, and reading it
// from the API server would cost every GitLab job's end a request. Without
// that cache (no pod watcher) the pod is read and matched. Unreadable, or
// gone (the API server authenticated the token only if its pod existed),
// is taken to run a job: the requester is then no owner.
func (h *Handler) runsJob(ctx context.Context, ns, name string) func() bool {
	return func() bool {
		key := types.NamespacedName{Namespace: ns, Name: name}
		if h.Pods != nil {
			err := h.Pods.Get(ctx, key, runnerpod.Meta())
			return !apierrors.IsNotFound(err)
		}
		pod := &corev1.Pod{}
		if err := h.Reader.Get(ctx, key, pod); err != nil {
			return true
		}
		_, runs := runnerpod.Match(pod, h.Config.Presets)
		return runs
	}
}

// boundPod is the pod the requester's ServiceAccount token is bound to, as
// the API server's authenticator put it in the request's user extras; ""
// unless it names exactly one.
func boundPod(req admission.Request) string {
	if v := req.UserInfo.Extra[serviceaccount.PodNameKey]; len(v) == 1 {
		return v[0]
	}
	return ""
}

// lookupNode reads the pod's node when Decide asks for it (a busy
// runner's review only): uncached, since a drain deadline set a moment ago
// must count. A node that cannot be read states no deadline.
func (h *Handler) lookupNode(ctx context.Context, name string) func() *corev1.Node {
	return func() *corev1.Node {
		if name == "" {
			return nil
		}
		node := &corev1.Node{}
		if err := h.Reader.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			logf.FromContext(ctx).Info("cannot read the pod's node for its drain deadline", "node", name, "error", err.Error())
			return nil
		}
		return node
	}
}

// lookupJob reads the pod's EphemeralRunner when Decide asks for it.
func (h *Handler) lookupJob(ctx context.Context, pod *corev1.Pod) func() JobRecord {
	return func() JobRecord {
		if runnerpod.EphemeralRunnerOwner(pod) == "" {
			return JobRecord{Signal: JobNotRead} // no EphemeralRunner to read: taken to be busy
		}
		return h.jobSignal(ctx, pod)
	}
}

// jobSignal reads the EphemeralRunner that owns an ARC scale-set pod and
// judges it (fleet.ReadEphemeralRunner); the job it names comes from the
// same read. Unreadable means busy.
func (h *Handler) jobSignal(ctx context.Context, pod *corev1.Pod) JobRecord {
	er, err := fleet.ReadEphemeralRunner(ctx, h.Reader, pod)
	if err != nil {
		logf.FromContext(ctx).Info("taking the runner to be busy", "pod", pod.Namespace+"/"+pod.Name, "error", err.Error())
	}
	r := JobRecord{Signal: er.Signal, OwnerDeleting: er.Deleting}
	if er.Signal == JobAssigned || er.Signal == JobOver {
		r.Job = er.Job
	}
	return r
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
	if w.unlabelled {
		// Before the answer (Handle): the watcher's cache must hold the
		// pod before the deletion removes it.
		if err := fleet.Label(ctx, h.Writer, f.Pod); err != nil {
			log.Error(err, "labelling the runner pod for the pod watcher")
		}
	}
}

// event is the Event of a decision an operator should see: every refusal
// (saying why and what would let it go on), a warn-mode pass, an override,
// a protection that expired, and a job owner nobody can be told to be.
func (h *Handler) event(f Facts, d Decision, startedBy string) {
	pod := f.Pod
	switch {
	case !d.Allowed && d.OwnerDeleting:
		// Someone else deleted the EphemeralRunner and ARC is waiting for
		// the job: say who, and tell no one to override on ARC's behalf.
		h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, refusedReason(f.Operation), string(f.Operation),
			"refused %s by %s: runner %q is busy with a job%s; its EphemeralRunner is being deleted%s, and ARC deletes this pod itself once the job ends",
			f.Operation, f.Requester, d.Status.Container.Name, refusalPlan(f, d), requestedBy(startedBy))
	case !d.Allowed && d.OwnerNotTaken != "":
		// The fleet's own cleanup refused: the operator must change the
		// layout or the preset, which the Event says.
		h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, refusedReason(f.Operation), string(f.Operation),
			"refused %s by %s: runner %q is busy%s; %s", f.Operation, f.Requester, d.Status.Container.Name, refusalPlan(f, d), d.OwnerNotTaken)
	case !d.Allowed:
		h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, refusedReason(f.Operation), string(f.Operation),
			"refused %s by %s: runner %q is busy%s and its job would be lost; someone granted %s may set %s=\"<reason>\" to drain it deliberately",
			f.Operation, f.Requester, d.Status.Container.Name, refusalPlan(f, d), OverridePermission, runnerpod.AllowDelete)
	case d.Warned:
		h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, refusedReason(f.Operation)+"InWarnMode", string(f.Operation),
			"%s by %s allowed in warn mode: runner %q is busy and enforce mode would refuse it%s", f.Operation, f.Requester, d.Status.Container.Name, ownerNotTaken(d))
	case d.Rule == runnerpod.RuleOverride:
		h.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, "DeleteOverridden", string(f.Operation),
			"%s by %s allowed by %s: %s", f.Operation, f.Requester, runnerpod.AllowDelete, d.Override)
	case d.Rule == runnerpod.RuleNodeDrain:
		h.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, "DrainDeadlinePassed", string(f.Operation),
			"%s by %s %s", f.Operation, f.Requester, d.Message)
	case d.Rule == runnerpod.RuleProtectionExpired:
		h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "ProtectionExpired", string(f.Operation),
			"%s by %s allowed: %s", f.Operation, f.Requester, d.Message)
	case d.Rule == runnerpod.RuleOwnerUnknown:
		h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, "JobOwnerUnknown", string(f.Operation),
			"%s by %s allowed: %s; set presets[%s].ownerPrincipals to the fleet's manager to protect such pods", f.Operation, f.Requester, d.Message, d.Runner.Preset.Name)
	}
}

// ownerNotTaken is "; " and why a requester named as the job's owner was
// not taken as it, or "": in warn mode the fleet's own cleanup that enforce
// mode would refuse is the operator's to fix before switching.
func ownerNotTaken(d Decision) string {
	if d.OwnerNotTaken == "" {
		return ""
	}
	return "; " + d.OwnerNotTaken
}

// mode is the guard's mode in namespace ns: the one the registration that
// called chose (ServedIn), else the namespace's label. A namespace that
// cannot be read gets the configured mode.
func (h *Handler) mode(ctx context.Context, ns string) config.Mode {
	if m, ok := ctx.Value(modeKey{}).(config.Mode); ok {
		return m
	}
	if h.Namespaces == nil {
		return h.Config.Guard.Mode
	}
	nsLabels, err := namespace.Labels(ctx, h.Namespaces, nil, ns)
	if err != nil {
		return h.Config.Guard.Mode
	}
	return config.ModeFor(nsLabels, h.Config.Guard.Mode)
}

func refusedReason(op Operation) string {
	if op == Eviction {
		return "EvictionRefused"
	}
	return "DeleteRefused"
}
