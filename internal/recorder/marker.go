package recorder

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/namespace"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// markerAnnotations are the pod annotations the cache keeps for the
// marker: the override (which frees the pod), the marks and their
// ownership.
var markerAnnotations = []string{runnerpod.AllowDelete, runnerpod.KarpenterDoNotDisrupt, runnerpod.ClusterAutoscalerSafeEvict, runnerpod.Marked}

// mark is one autoscaler's do-not-disrupt mark: its key and the value that
// holds the pod's node.
type mark struct{ key, value string }

// MarkPlan is the annotations patch that makes pod's marks follow busy:
// a key's new value, or nil to remove it; nil when the pod's marks are
// already what they should be.
//
// Each mark config turns on is set while busy and removed when not; one
// it turns off is removed. Only a mark runnerguard set, which
// runnerpod.Marked lists, is ever changed: a mark the pod came with, or
// that someone else wrote, is its author's (do-not-disrupt "false": never
// hold a node for me; "true": always) and is left as it is.
func MarkPlan(pod *corev1.Pod, busy bool, c config.Marks) map[string]*string {
	a := pod.Annotations
	owned := strings.Split(a[runnerpod.Marked], ",")
	patch := map[string]*string{}
	var nowOwned []string
	for _, m := range []struct {
		mark
		on bool
	}{{mark{runnerpod.KarpenterDoNotDisrupt, "true"}, c.Karpenter}, {mark{runnerpod.ClusterAutoscalerSafeEvict, "false"}, c.ClusterAutoscaler}} {
		v, present := a[m.key]
		switch {
		case present && !slices.Contains(owned, m.key):
			// The author's.
		case busy && m.on:
			if !present || v != m.value {
				patch[m.key] = &m.value
			}
			nowOwned = append(nowOwned, m.key)
		case present:
			patch[m.key] = nil
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

// Marker keeps the autoscalers' do-not-disrupt marks on runner pods while,
// and only while, the guard protects them (runnerpod.Protected, the guard's
// own pod-level rules): a node holding only idle or finished runners can be
// consolidated, one holding a busy runner is not. It runs on the leader,
// the marks' one writer, on the watcher's cache of runner pods: a pod
// created while runnerguard was down is marked when the leader sees it, and
// a mark is never left behind by a replica that died.
type Marker struct {
	Pods   *PodCache
	Client client.Client
	Config config.Config
	// Namespaces selects the opted-in namespaces: a pod elsewhere is not
	// protected, so it keeps none of runnerguard's marks.
	Namespaces labels.Selector
	Now        func() time.Time

	// ers holds ARC's EphemeralRunners where the API server serves them.
	ers *EphemeralRunners
}

// SetupWithManager runs the marker on the watcher's pod cache, which the
// watcher adds to mgr (set the watcher up first), and on ARC's
// EphemeralRunners while the API server serves them (EphemeralRunners
// follows ARC's CRD: installed after runnerguard, it is read without a
// restart).
func (m *Marker) SetupWithManager(mgr ctrl.Manager) error {
	names := m.Config.RunnerContainerNames()
	hasRunner := predicate.NewPredicateFuncs(func(o client.Object) bool {
		pod, ok := o.(*cachedPod)
		return ok && slices.ContainsFunc(pod.containers, func(c string) bool { return slices.Contains(names, c) })
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("runner-marks").
		WatchesRawSource(m.Pods.source(&handler.EnqueueRequestForObject{}, hasRunner))
	var err error
	if m.ers, err = NewEphemeralRunners(mgr.GetConfig(), &JobStamper{Reader: mgr.GetAPIReader(), Writer: m.Client}); err != nil {
		return err
	}
	if err := mgr.Add(m.ers); err != nil {
		return err
	}
	b = b.WatchesRawSource(m.ers.source())
	return b.Complete(m)
}

// Reconcile brings the pod's marks in line with its protection, and looks
// again when the protection ends.
func (m *Marker) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := m.Pods.Get(req.NamespacedName)
	if pod == nil {
		return ctrl.Result{}, nil
	}
	p, err := m.protection(ctx, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if plan := MarkPlan(pod, p.Busy, m.Config.Marks); plan != nil {
		if err := m.patch(ctx, pod, plan); err != nil {
			return ctrl.Result{}, err
		}
		logf.FromContext(ctx).V(1).Info("runner pod marks follow its protection", "pod", req.NamespacedName, "busy", p.Busy)
	}
	if p.Busy && !p.Until.IsZero() {
		// A second past the end: the guard counts whole seconds past the
		// cap (runnerpod.ProtectionEnds).
		return ctrl.Result{RequeueAfter: max(p.Until.Sub(m.Now())+time.Second, time.Second)}, nil
	}
	return ctrl.Result{}, nil
}

// protection is what the guard would say of pod now, for any requester it
// does not exempt.
func (m *Marker) protection(ctx context.Context, pod *corev1.Pod) (runnerpod.Protection, error) {
	nsLabels, err := namespace.Labels(ctx, m.Client, nil, pod.Namespace)
	if err != nil || !m.Namespaces.Matches(labels.Set(nsLabels)) {
		return runnerpod.Protection{}, client.IgnoreNotFound(err)
	}
	runner, ok := runnerpod.Match(pod, m.Config.Presets)
	if !ok {
		return runnerpod.Protection{}, nil
	}
	job := runnerpod.JobNotRead
	if ref := runnerpod.EphemeralRunnerRef(pod); runner.Preset.Name == runnerpod.ARCScaleSet && ref.Name != "" {
		// As the guard reads it: an EphemeralRunner not in the cache (or
		// none watched: no CRD) is unreadable, which is busy.
		var er *unstructured.Unstructured
		if m.ers != nil {
			er = m.ers.Get(types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name})
		}
		job, _ = runnerpod.EphemeralRunnerJob(er, ref.UID)
	}
	return runnerpod.Protected(pod, runner, job, m.Now()), nil
}

// patch writes the plan's annotations with a merge patch that carries the
// pod's UID: a pod recreated under its name has another, which the API
// server refuses to change, so it never gets another pod's marks. A pod
// already gone or replaced needs none.
func (m *Marker) patch(ctx context.Context, pod *corev1.Pod, plan map[string]*string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID, "annotations": plan}})
	if err != nil {
		return err
	}
	target := runnerpod.Meta()
	target.Namespace, target.Name = pod.Namespace, pod.Name
	err = m.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, body))
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}
