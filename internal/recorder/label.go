package recorder

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/presets"
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
				if _, ok := presets.Match(pod, l.Config.Presets); !ok || pod.DeletionTimestamp != nil {
					continue
				}
				if err := fleet.Label(ctx, l.Client, pod); err != nil {
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
