package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// ConnectPath is where the webhook server serves the guard's reviews of
// exec and attach; the chart's ValidatingWebhookConfiguration names it.
const ConnectPath = "/validate-runner-connect"

// ConnectHandler is the room of exec and attach: it judges CONNECT
// reviews of pods/exec and pods/attach (DecideConnect) with the pod
// guard's readers. It writes nothing: no note, Event or metric (a review
// anyone on the pod network can post must not change a record); a refusal
// is said to the caller and logged.
type ConnectHandler struct {
	Readers
	// refused keeps a refusal on the pod after the answer
	// (Handler.keepConnectRefusal); nil keeps none.
	refused func(ctx context.Context, f Facts, d Decision)
}

// Connect returns the handler of exec and attach reviews, reading as h
// does.
func (h *Handler) Connect() ConnectHandler { return ConnectHandler{h.Readers, h.keepConnectRefusal} }

// ConnectIn is Connect for the registration of mode's namespaces.
func (h *Handler) ConnectIn(mode config.Mode) admission.Handler { return h.Connect().In(mode) }

// In is c for the registration of mode's namespaces: as for deletes
// (ServedIn), the API server chose the mode, so the guard answers exec and
// attach in it.
func (c ConnectHandler) In(mode config.Mode) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		return c.Handle(context.WithValue(ctx, modeKey{}, mode), req)
	})
}

// ConnectModePath is where the guard reviews exec and attach in mode.
func ConnectModePath(mode config.Mode) string { return ConnectPath + "/" + string(mode) }

var connectOperations = map[string]Operation{"exec": Exec, "attach": Attach}

// Handle judges one review.
func (c ConnectHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	h := c.Readers
	op, ok := connectOperations[req.SubResource]
	if req.Operation != admissionv1.Connect || !ok {
		return admission.Allowed("runnerguard judges only exec and attach here")
	}
	if req.Name == "" || req.Namespace == "" {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("%w: %s without a pod name and namespace", errBadRequest, op))
	}
	// PodExecOptions and PodAttachOptions both name the container so.
	var opts struct {
		Container string `json:"container"`
	}
	if len(req.Object.Raw) > 0 {
		if err := json.Unmarshal(req.Object.Raw, &opts); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("%w: decoding the %s options: %w", errBadRequest, op, err))
		}
	}
	// Read now, uncached: the pod's state decides, and a review cannot be
	// trusted to bring it (the API server sends only the options).
	pod := &corev1.Pod{}
	if err := h.Reader.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Allowed("the pod is gone")
		}
		logf.FromContext(ctx).Error(err, "refused for now: cannot read the pod", "operation", op)
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("runnerguard: cannot read pod %s/%s to judge the %s: %w", req.Namespace, req.Name, op, err))
	}
	f := Facts{Pod: pod, Operation: op, Requester: req.UserInfo.Username, RequesterPod: boundPod(req), RequesterCredential: runnerpod.Credential(req.UserInfo.Extra), Now: h.Now(), Mode: h.mode(ctx, pod.Namespace),
		LookupJob: h.lookupJob(ctx, pod), RequesterPodRunsJob: h.runsJob(ctx, pod.Namespace, boundPod(req))}
	d := DecideConnect(f, opts.Container, h.Config)
	log := logf.FromContext(ctx).WithValues("operation", op, "rule", d.Rule, "requester", f.Requester, "pod", pod.Namespace+"/"+pod.Name, "container", opts.Container)
	switch {
	case !d.Allowed || d.Warned || d.Rule == runnerpod.RuleOverride || d.Rule == runnerpod.RuleProtectionExpired:
		log.Info("decided", "allowed", d.Allowed, "reason", d.Message, "preset", d.Runner.Preset.Name, "overrideReason", d.Override)
	default:
		log.V(1).Info("decided", "allowed", d.Allowed, "reason", d.Message)
	}
	if !d.Allowed {
		if c.refused != nil {
			c.refused(ctx, f, d)
		}
		return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, d.Message)
	}
	r := admission.Allowed(d.Message)
	if d.Warned {
		r = r.WithWarnings(d.Message)
	}
	return r
}
