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
	// Deaths writes death records and deletion notes.
	Deaths *death.Recorder
	Now    func() time.Time
}

var _ admission.Handler = &Handler{}

// NewHandler returns a Handler reading the clock.
func NewHandler(cfg config.Config, r client.Reader, rec events.EventRecorder, deaths *death.Recorder) *Handler {
	return &Handler{Config: cfg, Reader: r, Recorder: rec, Deaths: deaths, Now: time.Now}
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
	running := d.Allowed && d.Status.State == runnerpod.Running
	switch {
	case d.RecordDeath || (running && grace == 0):
		// An ended runner's record, or that of a runner removed at once,
		// whose terminated state may never be reported: written now with
		// what is known.
		h.async(ctx, func(ctx context.Context) error {
			_, err := h.Deaths.Record(ctx, pod, death.New(pod, d.Runner, d.Status, f.Requester))
			return err
		})
	case running:
		// The runner dies of this deletion; the watcher records how when
		// the kubelet reports it, naming the deleter noted here.
		h.async(ctx, func(ctx context.Context) error {
			return h.Deaths.MarkDeleted(ctx, pod, f.Requester, string(d.Rule))
		})
	}
}

func refusedReason(op Operation) string {
	if op == Eviction {
		return "EvictionRefused"
	}
	return "DeleteRefused"
}

// async runs a write off the review's path, so a DELETE is never slowed by
// the Event the guard writes about it.
func (h *Handler) async(ctx context.Context, write func(context.Context) error) {
	log := logf.FromContext(ctx)
	go func() {
		ctx, cancel := context.WithTimeout(logf.IntoContext(context.Background(), log), 10*time.Second)
		defer cancel()
		if err := write(ctx); err != nil {
			log.Error(err, "writing the death record")
		}
	}()
}
