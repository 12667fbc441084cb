package recorder

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// unlabelled selects the pods the Labeler looks at.
func unlabelled() labels.Selector {
	r, _ := labels.NewRequirement(runnerpod.RunnerLabel, selection.DoesNotExist, nil)
	return labels.NewSelector().Add(*r)
}

// Labeler puts the runner label on runner pods of opted-in namespaces that
// lack it, so that the watcher sees them: pods created while the injector
// was down (its failure policy is Ignore) or before runnerguard was
// installed. It runs on the leader, at start and every Interval, and lists
// only the unlabelled pods of opted-in namespaces, uncached.
type Labeler struct {
	// Reader lists pods and namespaces; Client patches pods.
	Reader     client.Reader
	Client     client.Client
	Config     config.Config
	Namespaces labels.Selector
	Interval   time.Duration
}

// NeedLeaderElection: only the leader labels.
func (l *Labeler) NeedLeaderElection() bool { return true }

// Start labels until ctx ends.
func (l *Labeler) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := l.Label(ctx); err != nil {
			logf.FromContext(ctx).Error(err, "labelling runner pods the injector did not see")
		}
	}, l.Interval)
	return nil
}

// Label labels what is unlabelled now.
func (l *Labeler) Label(ctx context.Context) error {
	nss := &metav1.PartialObjectMetadataList{}
	nss.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := l.Reader.List(ctx, nss, client.MatchingLabelsSelector{Selector: l.Namespaces}); err != nil {
		return err
	}
	n := 0
	for _, ns := range nss.Items {
		pods := &corev1.PodList{}
		opts := []client.ListOption{client.InNamespace(ns.Name), client.MatchingLabelsSelector{Selector: unlabelled()}, client.Limit(500)}
		for {
			if err := l.Reader.List(ctx, pods, opts...); err != nil {
				return err
			}
			for i := range pods.Items {
				pod := &pods.Items[i]
				if _, ok := runnerpod.Match(pod, l.Config.Presets); !ok || pod.DeletionTimestamp != nil {
					continue
				}
				if err := Label(ctx, l.Client, pod); err != nil {
					return err
				}
				n++
			}
			if pods.Continue == "" {
				break
			}
			opts = append(opts, client.Continue(pods.Continue))
		}
	}
	if n > 0 {
		logf.FromContext(ctx).Info("labelled runner pods the injector did not see", "count", n)
	}
	return nil
}

// Label gives pod the runner label, so that the recorder's cache holds it,
// unless it has it. It is the one way runnerguard writes that label after a
// pod's creation (the injector sets it in the pod it admits): the labeler
// for pods the injector did not see, and the guard for such a pod whose
// deletion it lets through, before the deletion can remove it unseen. The
// patch carries the pod's UID: a pod recreated under that name has another,
// which the API server refuses to change, so it never gets the label by
// mistake. A pod already gone, or replaced by another of its name (the API
// server refuses the UID as an invalid change), needs no label.
func Label(ctx context.Context, w client.Writer, pod *corev1.Pod) error {
	if _, ok := pod.Labels[runnerpod.RunnerLabel]; ok {
		return nil
	}
	base := runnerpod.Meta()
	base.Namespace, base.Name = pod.Namespace, pod.Name
	patched := base.DeepCopy()
	patched.UID = pod.UID
	patched.Labels = map[string]string{runnerpod.RunnerLabel: "true"}
	err := w.Patch(ctx, patched, client.MergeFrom(base))
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}
