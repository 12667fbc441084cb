package report

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Report is what is known of a pod's runner deaths.
type Report struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	// Exists is false when the pod is gone and only its records remain.
	Exists bool `json:"exists"`
	// Runner is the runner's state when the pod exists.
	Runner  string         `json:"runner,omitempty"`
	Records []death.Record `json:"records"`
	// Refusals are those kept on the live pod so far (a record has its
	// own, as they stood at the death).
	Refusals *v1alpha1.Refusals `json:"refusals,omitempty"`
	// Zombie is the live pod's zombie, as the leader named it: its kind,
	// since when, and what that means in its fleet.
	Zombie *Zombie `json:"zombie,omitempty"`
}

// Zombie is a live runner the leader named a zombie.
type Zombie struct {
	Kind  string    `json:"kind"`
	Since time.Time `json:"since"`
	// Note is the leader's word on it (presets.ZombieNote).
	Note string `json:"note"`
}

// Lookup gathers a pod's death records: the RunnerDeath objects the pod
// watcher wrote, which only runnerguard can write and which outlive the pod
// until retention removes them, and, while the pod exists, the deaths its
// status shows that are not on record yet. Events are never read: anyone
// who may create Events could have written one.
func Lookup(ctx context.Context, c client.Reader, ps []runnerpod.Preset, namespace, name string) (Report, error) {
	rep := Report{Namespace: namespace, Pod: name}
	byKey := map[string]death.Record{}
	pod := &corev1.Pod{}
	err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod)
	switch {
	case err == nil:
		rep.Exists = true
		if runner, ok := presets.Match(pod, ps); ok {
			rep.Runner = runnerpod.RunnerStatus(pod, runner.Containers).State.String()
			rep.Refusals = death.Refusals(pod)
			if z, ok := runnerpod.ZombieOf(pod); ok {
				rep.Zombie = &Zombie{Kind: z.Kind, Since: z.Since, Note: presets.ZombieNote(runner, z)}
			}
			for _, r := range death.Deaths(pod, runner) {
				r.Deleted = death.CausedByDeletion(pod, r)
				byKey[r.Key()] = r
			}
		} else {
			rep.Runner = "not a runner pod"
		}
	case !apierrors.IsNotFound(err):
		return rep, fmt.Errorf("reading pod %s/%s: %w", namespace, name, err)
	}
	list := &v1alpha1.RunnerDeathList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return rep, fmt.Errorf("listing RunnerDeaths in %s: %w", namespace, err)
	}
	for i := range list.Items {
		r := death.FromObject(&list.Items[i])
		if r.Pod != name || (rep.Exists && r.UID != string(pod.UID)) {
			continue // another pod, or an earlier pod of the same name
		}
		byKey[r.Key()] = r // the record, which knows the deleter, wins
	}
	for _, r := range byKey {
		rep.Records = append(rep.Records, r)
	}
	SortNewestFirst(rep.Records)
	return rep, nil
}

// SortNewestFirst orders records by when the runner ended, unknown ends
// (deleted while running) first.
func SortNewestFirst(rs []death.Record) {
	slices.SortFunc(rs, func(a, b death.Record) int { return cmp.Compare(finished(b), finished(a)) })
}

func finished(r death.Record) int64 {
	if r.FinishedAt == nil {
		return 1<<63 - 1 // still unknown: newest
	}
	return r.FinishedAt.UnixNano()
}
