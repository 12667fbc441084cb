package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/namespace"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Readers are what every review's handler reads its facts with: the
// configuration, the API, the caches and the clock.
type Readers struct {
	Config config.Config
	// Reader reads pods for evictions and exec, EphemeralRunners for ARC's
	// job signal, and nodes, uncached: all are rare, and a stale pod would
	// misjudge.
	Reader client.Reader
	// Namespaces reads a namespace's labels (for its mode) from the
	// manager's cache; nil: every namespace has the configured mode.
	Namespaces client.Reader
	// Pods reads the runner pods' metadata from the cache every replica
	// keeps when the watcher runs; nil without one. A review whose pod is
	// there with the review's UID is confirmed without a GET.
	Pods client.Reader
	// Nodes reads nodes' metadata (NodeMeta) from the cache every
	// replica keeps when the watcher runs, whose RBAC lists and watches
	// nodes; nil without one: the node is read from the API server.
	Nodes client.Reader
	Now   func() time.Time
	// live shares and bounds the reads, through Reader, of the pods the
	// reviews do not bring (podread.go).
	live *podReads
}

// runsJob reports whether the pod named, to which requester's token is
// bound, is a runner pod, when Decide asks. A bound token's pod is in its
// ServiceAccount's namespace; a requester that is no ServiceAccount is
// taken to run a job. A labelled runner pod is in the runner pods' cache; a pod
// the cache does not hold (a fleet manager's) runs no job, and reading it
// from the API server would cost every GitLab job's end a request. Without
// that cache (no pod watcher) the pod is read and matched. Unreadable, or
// gone (the API server authenticated the token only if its pod existed),
// is taken to run a job: the requester is then no owner.
func (h Readers) runsJob(ctx context.Context, requester, name string) func() bool {
	return func() bool {
		ns, _, err := serviceaccount.SplitUsername(requester)
		if err != nil {
			return true
		}
		key := types.NamespacedName{Namespace: ns, Name: name}
		if h.Pods != nil {
			err := h.Pods.Get(ctx, key, runnerpod.Meta())
			return !apierrors.IsNotFound(err)
		}
		pod := &corev1.Pod{}
		if err := h.Reader.Get(ctx, key, pod); err != nil {
			return true
		}
		_, runs := presets.Match(pod, h.Config.Presets)
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
// runner's review only), for its drain deadline. From the nodes' cache
// where there is one: a live read would put a request to the API server
// on every refusal's path. The cache follows the API server's watch, so a
// deadline set a moment before the review may not be there yet: the
// runner is refused once more and the drain, which evicts until it may,
// is let through on its next try. A node the cache does not hold, or that
// cannot be read, states no deadline.
func (h Readers) lookupNode(ctx context.Context, name string) func() *corev1.Node {
	return func() *corev1.Node {
		if name == "" {
			return nil
		}
		if h.Nodes != nil {
			meta := NodeMeta()
			if err := h.Nodes.Get(ctx, types.NamespacedName{Name: name}, meta); err != nil {
				if !apierrors.IsNotFound(err) {
					logf.FromContext(ctx).Info("cannot read the pod's node for its drain deadline", "node", name, "error", err.Error())
				}
				return nil
			}
			return &corev1.Node{ObjectMeta: meta.ObjectMeta}
		}
		node := &corev1.Node{}
		if err := h.Reader.Get(ctx, types.NamespacedName{Name: name}, node); err != nil {
			logf.FromContext(ctx).Info("cannot read the pod's node for its drain deadline", "node", name, "error", err.Error())
			return nil
		}
		return node
	}
}

// lookupJob reads the fleet's record of the pod's runner (ARC's
// EphemeralRunner) when Decide asks for it, and judges it
// (presets.ReadRecord); the job it names comes from the same read. A pod
// no record controls has none to read (taken to be busy); unreadable means
// busy.
func (h Readers) lookupJob(ctx context.Context, pod *corev1.Pod) func(runnerpod.Runner) JobRecord {
	return func(runner runnerpod.Runner) JobRecord {
		return h.readRecord(ctx, pod, runner)
	}
}

func (h Readers) readRecord(ctx context.Context, pod *corev1.Pod, runner runnerpod.Runner) JobRecord {
	er, err := presets.ReadRecord(ctx, h.Reader, runner, pod)
	if err != nil {
		logf.FromContext(ctx).Info("taking the runner to be busy", "pod", pod.Namespace+"/"+pod.Name, "error", err.Error())
	}
	r := JobRecord{Signal: er.Signal, OwnerDeleting: er.Deleting}
	if er.Signal == JobAssigned || er.Signal == JobOver {
		r.Job = er.Job
	}
	return r
}

// mode is the guard's mode in namespace ns: the one the registration that
// called chose (in, after.go), else the namespace's label. A namespace that
// cannot be read gets the configured mode.
func (h Readers) mode(ctx context.Context, ns string) config.Mode {
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
		var err error
		if pod, err = h.readPod(ctx, types.NamespacedName{Namespace: req.Namespace, Name: req.Name}); err != nil {
			if apierrors.IsNotFound(err) {
				return f, rv, errPodGone
			}
			return f, rv, fmt.Errorf("%w %s/%s: %w", errPodUnreadable, req.Namespace, req.Name, err)
		}
		// Read from the API server just now: it exists with this UID.
		rv.seen.confirmed = true
	default:
		return f, rv, errNotGuarded
	}
	f.Pod = pod
	f.Mode = h.mode(ctx, pod.Namespace)
	f.LookupJob = h.lookupJob(ctx, pod)
	f.LookupNode = h.lookupNode(ctx, pod.Spec.NodeName)
	f.RequesterPodRunsJob = h.runsJob(ctx, f.Requester, f.RequesterPod)
	return f, rv, nil
}
