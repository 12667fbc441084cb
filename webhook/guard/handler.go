package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/death"
	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

// Handler is the guard's admission handler: it reads DELETE reviews of pods
// (the pod is the oldObject) and CREATE reviews of pods/eviction (the object
// is the Eviction, so the pod is read from the API).
type Handler struct {
	Config config.Config
	// Reader reads pods for evictions and EphemeralRunners for ARC's job
	// signal, uncached: both are rare, and a stale pod would misjudge.
	Reader   client.Reader
	Recorder events.EventRecorder
	Now      func() time.Time
	// deaths remembers the records written, so repeated reviews of one
	// death never log it twice.
	deaths *seenSet
}

var _ admission.Handler = &Handler{}

// NewHandler returns a Handler with its clock and record memory set.
func NewHandler(cfg config.Config, r client.Reader, rec events.EventRecorder) *Handler {
	return &Handler{Config: cfg, Reader: r, Recorder: rec, Now: time.Now, deaths: newSeenSet(4096)}
}

// Handle judges one review.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	facts, dryRun, err := h.facts(ctx, req)
	switch {
	case errors.Is(err, errBadRequest):
		return admission.Errored(http.StatusBadRequest, err)
	case errors.Is(err, errPodGone):
		return admission.Allowed("the pod is gone")
	case errors.Is(err, errNotGuarded):
		return admission.Allowed("runnerguard judges only pod deletes and evictions")
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	}
	d := Decide(facts, h.Config)
	decisions.WithLabelValues(string(facts.Operation), decisionLabel(d), string(d.Rule)).Inc()
	h.sideEffects(ctx, facts, d, dryRun, gracePeriod(req))
	return response(facts.Operation, d)
}

var (
	errBadRequest  = errors.New("malformed admission review")
	errPodGone     = errors.New("pod not found")
	errNotGuarded  = errors.New("not a guarded operation")
	evictionSubres = "eviction"
)

// facts decodes the review and gathers what Decide needs.
func (h *Handler) facts(ctx context.Context, req admission.Request) (Facts, bool, error) {
	f := Facts{Requester: req.UserInfo.Username, Now: h.Now()}
	dryRun := req.DryRun != nil && *req.DryRun
	pod := &corev1.Pod{}
	switch {
	case req.Operation == admissionv1.Delete && req.SubResource == "":
		f.Operation = Delete
		if len(req.OldObject.Raw) == 0 {
			return f, false, fmt.Errorf("%w: DELETE without oldObject", errBadRequest)
		}
		// A deletecollection review has no request name: the pod is in
		// oldObject either way.
		if err := json.Unmarshal(req.OldObject.Raw, pod); err != nil {
			return f, false, fmt.Errorf("%w: decoding oldObject as a Pod: %w", errBadRequest, err)
		}
	case req.Operation == admissionv1.Create && req.SubResource == evictionSubres:
		f.Operation = Eviction
		var ev policyv1.Eviction
		if err := json.Unmarshal(req.Object.Raw, &ev); err != nil {
			return f, false, fmt.Errorf("%w: decoding object as an Eviction: %w", errBadRequest, err)
		}
		// A server-side dry-run drain leaves request.dryRun false: the dry
		// run is only in the Eviction's deleteOptions.
		if o := ev.DeleteOptions; o != nil && slices.Contains(o.DryRun, metav1.DryRunAll) {
			dryRun = true
		}
		if req.Name == "" || req.Namespace == "" {
			return f, false, fmt.Errorf("%w: eviction without a pod name and namespace", errBadRequest)
		}
		if err := h.Reader.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, pod); err != nil {
			if apierrors.IsNotFound(err) {
				return f, dryRun, errPodGone
			}
			return f, dryRun, fmt.Errorf("reading pod %s/%s for its eviction: %w", req.Namespace, req.Name, err)
		}
	default:
		return f, dryRun, errNotGuarded
	}
	f.Pod = pod
	if NeedsJobSignal(pod, h.Config) {
		f.Job = h.jobSignal(ctx, pod)
	}
	return f, dryRun, nil
}

// jobSignal reads the EphemeralRunner that owns an ARC scale-set pod. ARC's
// listener writes the assigned job into its status (jobRequestId; jobId in
// newer releases); none means idle. Unreadable means busy.
func (h *Handler) jobSignal(ctx context.Context, pod *corev1.Pod) JobSignal {
	er := &unstructured.Unstructured{}
	er.SetAPIVersion(runnerpod.ARCScaleSetGroup + "/v1alpha1")
	er.SetKind(runnerpod.EphemeralRunnerKind)
	key := types.NamespacedName{Namespace: pod.Namespace, Name: runnerpod.EphemeralRunnerOwner(pod)}
	if err := h.Reader.Get(ctx, key, er); err != nil {
		logf.FromContext(ctx).Info("cannot read the EphemeralRunner; taking the runner to be busy", "ephemeralRunner", key.Name, "error", err.Error())
		return JobUnreadable
	}
	reqID, _, _ := unstructured.NestedFieldNoCopy(er.Object, "status", "jobRequestId")
	jobID, _, _ := unstructured.NestedString(er.Object, "status", "jobId")
	if jobID != "" || nonZero(reqID) {
		return JobAssigned
	}
	return JobNone
}

func nonZero(v any) bool {
	switch n := v.(type) {
	case int64:
		return n != 0
	case float64:
		return n != 0
	case string:
		return n != "" && n != "0"
	}
	return false
}

// gracePeriod is the DELETE's grace period, or -1 when not given.
func gracePeriod(req admission.Request) int64 {
	var o metav1.DeleteOptions
	if len(req.Options.Raw) == 0 || json.Unmarshal(req.Options.Raw, &o) != nil || o.GracePeriodSeconds == nil {
		return -1
	}
	return *o.GracePeriodSeconds
}

// sideEffects logs the decision, emits Events and writes death records.
// A dry run gets the same answer and none of them.
func (h *Handler) sideEffects(ctx context.Context, f Facts, d Decision, dryRun bool, grace int64) {
	log := logf.FromContext(ctx).WithValues("operation", f.Operation, "rule", d.Rule, "requester", f.Requester, "dryRun", dryRun)
	if d.Rule == RuleNotRunnerPod || d.Rule == RuleTerminating {
		log.V(2).Info("allowed", "reason", d.Message)
		return
	}
	log.V(1).Info("decided", "allowed", d.Allowed, "reason", d.Message, "preset", d.Runner.Preset.Name)
	if dryRun {
		return
	}
	pod := f.Pod
	switch {
	case !d.Allowed:
		h.Recorder.Eventf(pod, nil, corev1.EventTypeWarning, refusedReason(f.Operation), string(f.Operation),
			"refused %s by %s: runner %q is busy; set %s=\"<reason>\" to override", f.Operation, f.Requester, d.Status.Container.Name, runnerpod.AllowDelete)
	case d.Rule == RuleOverride:
		log.Info("busy runner released by override", "overrideReason", d.Override)
		h.Recorder.Eventf(pod, nil, corev1.EventTypeNormal, "DeleteOverridden", string(f.Operation),
			"%s by %s allowed by %s: %s", f.Operation, f.Requester, runnerpod.AllowDelete, d.Override)
	}
	if d.RecordDeath {
		h.recordDeath(ctx, death.New(pod, d.Runner, d.Status, f.Requester))
	} else if d.Allowed && d.Status.State == runnerpod.Running {
		// The runner dies of this deletion; the kubelet's report of how
		// follows, unless the pod is removed at once.
		log.Info("deletion of a running runner allowed", "gracePeriodSeconds", grace)
		if grace == 0 {
			h.recordDeath(ctx, death.New(pod, d.Runner, runnerpod.Status{State: runnerpod.Running, Container: d.Status.Container}, f.Requester))
		}
	}
}

func refusedReason(op Operation) string {
	if op == Eviction {
		return "EvictionRefused"
	}
	return "DeleteRefused"
}

// recordDeath logs the death record once per pod UID and container start.
func (h *Handler) recordDeath(ctx context.Context, r death.Record) {
	if !h.deaths.add(r.Key()) {
		return
	}
	deaths.WithLabelValues(string(r.Class)).Inc()
	// One key holding the whole record: its JSON is the record's schema,
	// and its fields cannot collide with the request's own log keys.
	logf.FromContext(ctx).WithName("death").Info("runner death record", "record", r)
}
