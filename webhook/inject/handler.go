package inject

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"

	"github.com/runnerguard/runnerguard/internal/config"
	ns "github.com/runnerguard/runnerguard/internal/namespace"
	"github.com/runnerguard/runnerguard/internal/responder"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Handler is the injector's admission handler. It implements
// admission.Handler rather than controller-runtime's Defaulter, because a
// Defaulter can neither return admission warnings nor allow a pod while
// reporting a problem (its errors deny), and the injector must do both.
type Handler struct {
	Config config.Config
	// Namespaces reads the pod's namespace for its Pod Security level. In
	// the manager it is the cached client: namespaces are read on every
	// runner pod CREATE and change rarely.
	Namespaces client.Reader
	// Live reads a namespace the cache has not seen yet (created a moment
	// before the pod, as CI systems do per job); nil: no second look.
	Live client.Reader
	// Recorder, when set, repeats each warning as a Warning Event where a
	// person looks (warningEvents): the admission warning reaches only the
	// client that created the pod, usually a controller that drops it.
	Recorder events.EventRecorder
	// PodResourcesDropped: the API server drops a pod's spec.resources
	// (Facts.PodResourcesDropped), read once at start.
	PodResourcesDropped bool
	// EvictionResponder: the API server runs the eviction-request model
	// (responder.Served, read once at start), so a runner pod names
	// runnerguard among its eviction responders. Without it the pod is
	// left as before: an older server would drop or refuse the field.
	EvictionResponder bool
}

var _ admission.Handler = &Handler{}

// NewHandler returns a Handler reading namespaces through namespaces.
func NewHandler(cfg config.Config, namespaces client.Reader) *Handler {
	return &Handler{Config: cfg, Namespaces: namespaces}
}

// unmarshalPod decodes a review's raw pod as the API server's JSON serializer
// does (case-sensitively, integers kept as int64). controller-runtime's
// Decoder goes through the universal deserializer, which first parses the
// whole pod once more only to read its apiVersion and kind, which the
// review's rules already fix (pods, v1): a parse the injector need not pay
// for (make bench measures a review's cost).
func unmarshalPod(raw []byte, pod *corev1.Pod) error {
	if len(raw) == 0 {
		return errors.New("there is no content to decode")
	}
	return kjson.UnmarshalCaseSensitivePreserveInts(raw, pod)
}

// Handle mutates one pod CREATE. It answers with an error only for a
// request that carries no decodable pod, which the API server never sends;
// everything else is allowed, with warnings for what was left undone.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	log := logf.FromContext(ctx)
	if req.Operation != admissionv1.Create || req.SubResource != "" {
		return admission.Allowed("runnerguard instruments only pod creation")
	}
	pod := &corev1.Pod{}
	if err := unmarshalPod(req.Object.Raw, pod); err != nil {
		count(req, Error)
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod of the CREATE request: %w", err))
	}
	facts := Facts{Requester: req.UserInfo.Username, Credential: runnerpod.Credential(req.UserInfo.Extra), BoundPod: runnerpod.BoundPod(req.UserInfo.Extra), PodResourcesDropped: h.PodResourcesDropped}
	if h.Config.Inject.Vitals.Enabled {
		facts.HostMountRefused = h.hostMountRefusal(ctx, req.Namespace)
	}
	p := &patch{}
	out := mutate(pod, facts, h.Config, p)
	changed := p.changed()
	instrumented := out.Result == Injected || out.Result == NoSidecar
	if !changed && instrumented {
		out.Result = Unchanged
	}
	naming := h.naming(req, instrumented, &out)
	count(req, out.Result)
	for _, w := range out.Warnings {
		log.Info("injection incomplete", "preset", out.Preset, "warning", w)
	}
	log.V(1).Info("pod create", "result", out.Result, "preset", out.Preset)

	if len(out.Warnings) > 0 && (req.DryRun == nil || !*req.DryRun) {
		h.warningEvents(req.Namespace, pod, out.Warnings)
	}
	// The responder entry's ops follow the mutation's, on the same raw pod.
	p.ops = append(p.ops, naming...)
	return p.response().WithWarnings(out.Warnings...)
}

// naming is the patch that names runnerguard among an instrumented runner
// pod's eviction responders, where the server runs them; a warning for one
// it cannot name joins out's. It is patched onto the raw pod, apart from
// Mutate: it depends on the server (an alpha field, dropped or refused
// where the gate is off), which Mutate's golden pods do not.
func (h *Handler) naming(req admission.Request, instrumented bool, out *Outcome) []jsonpatch.Operation {
	if !h.EvictionResponder || !instrumented {
		return nil
	}
	ops, warning := responder.Naming(req.Object.Raw)
	if warning != "" {
		out.Warnings = append(out.Warnings, warning)
	}
	return ops
}

// Why the Events are emitted.
const (
	// ReasonIncomplete: the pod was admitted without part of its
	// instrumentation; the note says what to change.
	ReasonIncomplete = "InjectionIncomplete"
	// maxNote is the longest note the API server accepts on an Event.
	maxNote = 1024
)

// warningEvents repeats each warning as a Warning Event. The pod does not
// exist yet (at admission it may not even have its name), so the Event
// regards its controller (the ReplicaSet, Job or EphemeralRunner that
// `kubectl describe` shows) and, for a pod without one, the pod by its name
// or generateName, where `kubectl events -n NAMESPACE` shows it. The
// recorder sends Events from its own goroutine: none waits on the answer.
// The owner named is the pod's author's word, so an Event may land on
// another object of the namespace; its text is runnerguard's own and
// nothing runnerguard decides reads Events.
func (h *Handler) warningEvents(namespace string, pod *corev1.Pod, warnings []string) {
	if h.Recorder == nil {
		return
	}
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	var regarding runtime.Object = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if owner := metav1.GetControllerOfNoCopy(pod); owner != nil {
		regarding = &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: owner.APIVersion, Kind: owner.Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: owner.Name, UID: owner.UID},
		}
	}
	for _, w := range warnings {
		note := "pod " + name + ": " + w
		if len(note) > maxNote {
			note = strings.ToValidUTF8(note[:maxNote-3], "") + "..."
		}
		h.Recorder.Eventf(regarding, nil, corev1.EventTypeWarning, ReasonIncomplete, "Create", "%s", note)
	}
}

// hostMountRefusal reads the namespace's labels. The namespace is read as
// metadata only, so the manager's cache keeps namespaces' metadata and
// nothing more. A namespace that cannot be read refuses the sidecar: if
// its Pod Security level forbids hostPath, adding one would make the pod
// fail admission, which is worse than a pod without vitals.
func (h *Handler) hostMountRefusal(ctx context.Context, namespace string) string {
	nsLabels, err := ns.Labels(ctx, h.Namespaces, h.Live, namespace)
	if err != nil {
		logf.FromContext(ctx).Error(err, "reading the namespace's Pod Security level", "namespace", namespace)
		return fmt.Sprintf("its namespace %q could not be read to check its Pod Security level: %v; check that runnerguard may get namespaces (its ClusterRole) and its logs", namespace, err)
	}
	return HostMountRefusal(namespace, nsLabels, h.Config.Inject.PodSecurityDefault)
}
