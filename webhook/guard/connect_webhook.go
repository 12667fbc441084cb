package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// ConnectPath is where the webhook server serves the guard's reviews of
// exec, attach, port-forward and proxy; the chart's
// ValidatingWebhookConfiguration names it.
const ConnectPath = "/validate-runner-connect"

// ConnectHandler is the room of connections into pods: it judges CONNECT
// reviews of pods/exec, pods/attach, pods/portforward and pods/proxy
// (DecideConnect) with the pod guard's readers. It writes no note, Event
// or metric (a review anyone on the pod network can post must not change a
// record); a refusal is said to the caller and logged, and what follows it
// keeps it on the pod (as it keeps what warn mode let through) only for a
// pod the API server has with that name (Handler.keptConnectRefusal).
type ConnectHandler struct{ h *Handler }

// Connect returns the handler of connect reviews, reading as h does.
func (h *Handler) Connect() ConnectHandler { return ConnectHandler{h} }

// ConnectModePath is where the guard reviews connections in mode.
func ConnectModePath(mode config.Mode) string { return ConnectPath + "/" + string(mode) }

// Handle judges one review, and hands what follows its answer to the
// pool: the admission.Handler around Review.
func (c ConnectHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	return c.h.after.handler(c.Review).Handle(ctx, req)
}

var connectOperations = map[string]Operation{"exec": Exec, "attach": Attach, "portforward": PortForward, "proxy": Proxy}

// Review judges one review into its answer and what follows it.
func (c ConnectHandler) Review(ctx context.Context, req admission.Request) (admission.Response, After) {
	h := c.h.Readers
	op, ok := connectOperations[req.SubResource]
	if req.Operation != admissionv1.Connect || req.Resource.Resource != "pods" || !ok {
		return admission.Allowed("runnerguard judges only exec, attach, portforward and proxy of pods here"), nil
	}
	name, err := connectedPod(op, req.Name)
	if err == nil && req.Namespace == "" {
		err = fmt.Errorf("%w: %s without a namespace", errBadRequest, op)
	}
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err), nil
	}
	// PodExecOptions and PodAttachOptions both name the container so;
	// PodPortForwardOptions and PodProxyOptions name none.
	var opts struct {
		Container string `json:"container"`
	}
	if len(req.Object.Raw) > 0 {
		if err := json.Unmarshal(req.Object.Raw, &opts); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("%w: decoding the %s options: %w", errBadRequest, op, err)), nil
		}
	}
	// Read now, uncached: the pod's state decides, and a review cannot be
	// trusted to bring it (the API server sends only the options). A read
	// not done in time is a refusal for now, never a wait the API server
	// ends with the failure policy (podread.go).
	pod, err := h.readPod(ctx, types.NamespacedName{Namespace: req.Namespace, Name: name})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Allowed("the pod is gone"), nil
		}
		if errors.Is(err, errReadsBusy) {
			logf.FromContext(ctx).Info("refused for now: the pod's read was not done in time", "operation", op, "pod", req.Namespace+"/"+name)
			return retryLater(fmt.Sprintf("cannot read pod %s/%s in time to judge the %s", req.Namespace, name, op)), nil
		}
		logf.FromContext(ctx).Error(err, "refused for now: cannot read the pod", "operation", op)
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("runnerguard: cannot read pod %s/%s to judge the %s: %w", req.Namespace, name, op, err)), nil
	}
	f := Facts{Pod: pod, Operation: op, Requester: req.UserInfo.Username, RequesterPod: boundPod(req), RequesterCredential: runnerpod.Credential(req.UserInfo.Extra), Now: h.Now(), Mode: h.mode(ctx, pod.Namespace),
		LookupJob: h.lookupJob(ctx, pod), RequesterPodRunsJob: h.runsJob(ctx, req.UserInfo.Username, boundPod(req))}
	d := DecideConnect(f, opts.Container, h.Config)
	log := logf.FromContext(ctx).WithValues("operation", op, "rule", d.Rule, "requester", f.Requester, "pod", pod.Namespace+"/"+pod.Name, "container", opts.Container)
	switch {
	case !d.Allowed || d.Warned || d.Rule == runnerpod.RuleOverride || d.Rule == runnerpod.RuleProtectionExpired:
		log.Info("decided", "allowed", d.Allowed, "reason", d.Message, "preset", d.Runner.Preset.Name, "overrideReason", d.Override)
	default:
		log.V(1).Info("decided", "allowed", d.Allowed, "reason", d.Message)
	}
	if !d.Allowed {
		return refuse(http.StatusForbidden, metav1.StatusReasonForbidden, d.Message), c.h.keptConnectRefusal(f, d)
	}
	if d.Warned {
		// What enforce would refuse is kept as a refusal is: the warn
		// week's evidence.
		return admission.Allowed(d.Message).WithWarnings(d.Message), c.h.keptConnectRefusal(f, d)
	}
	return admission.Allowed(d.Message), nil
}

// connectedPod is the pod a connection names. A proxy's name is
// [scheme:]pod[:port], as the API server's proxy splits it: looking up the
// whole of it would find no pod and let the request through as to a pod
// that is gone.
func connectedPod(op Operation, name string) (string, error) {
	if op == Proxy {
		_, pod, _, ok := utilnet.SplitSchemeNamePort(name)
		if !ok {
			return "", fmt.Errorf("%w: proxy to %q, not [scheme:]pod[:port]", errBadRequest, name)
		}
		name = pod
	}
	if name == "" {
		return "", fmt.Errorf("%w: %s without a pod name", errBadRequest, op)
	}
	return name, nil
}
