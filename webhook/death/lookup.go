package death

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

// Report is what is known of a pod's runner deaths.
type Report struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Exists is false when the pod is gone and only Events remain.
	Exists bool `json:"exists"`
	// Runner is the runner's state when the pod exists.
	Runner  string   `json:"runner,omitempty"`
	Records []Record `json:"records"`
}

// Lookup gathers a pod's death records: from its status while it exists,
// and from the RunnerDied Events runnerguard wrote, which outlive the pod
// (until the API server's event TTL). Records of the same death are merged,
// the Event's (which knows the deleter) winning.
func Lookup(ctx context.Context, c client.Reader, presets []runnerpod.Preset, namespace, name string) (Report, error) {
	rep := Report{Namespace: namespace, Pod: name}
	byKey := map[string]Record{}
	pod := &corev1.Pod{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod)
	switch {
	case err == nil:
		rep.Exists = true
		if runner, ok := runnerpod.Match(pod, presets); ok {
			rep.Runner = runnerpod.RunnerStatus(pod, runner.Containers).State.String()
			for _, r := range Deaths(pod, runner) {
				r.Deleted = CausedByDeletion(pod, r)
				byKey[r.Key()] = r
			}
		} else {
			rep.Runner = "not a runner pod"
		}
	case !apierrors.IsNotFound(err):
		return rep, fmt.Errorf("reading pod %s/%s: %w", namespace, name, err)
	}
	events := &eventsv1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(namespace)); err != nil {
		return rep, fmt.Errorf("listing Events in %s: %w", namespace, err)
	}
	for _, e := range events.Items {
		if e.Reason != ReasonDied || e.Regarding.Kind != "Pod" || e.Regarding.Name != name {
			continue
		}
		if rep.Exists && e.Regarding.UID != pod.UID {
			continue // an earlier pod of the same name
		}
		if r, err := Parse(e.Annotations[RecordAnnotation]); err == nil {
			byKey[r.Key()] = r
		}
	}
	for _, r := range byKey {
		rep.Records = append(rep.Records, r)
	}
	slices.SortFunc(rep.Records, func(a, b Record) int { return cmp.Compare(finished(b), finished(a)) })
	return rep, nil
}

func finished(r Record) int64 {
	if r.FinishedAt == nil {
		return 1<<63 - 1 // still unknown: newest
	}
	return r.FinishedAt.UnixNano()
}
