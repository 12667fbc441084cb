package recorder

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/refusal"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// jobAnnotations are what the pod cache keeps for the record's job start.
var jobAnnotations = []string{runnerpod.JobAssignedAt}

// refusalAnnotations are what the pod cache keeps for the record's
// refusals, which the guard wrote while the runner ran.
var refusalAnnotations = []string{refusal.Annotation}

// creatorAnnotations are what the pod cache keeps for the record to check
// a job-owner note against: the pod's recorded creator.
var creatorAnnotations = []string{runnerpod.CreatedBy}

// jobStart is a runner whose fleet's record (ARC's EphemeralRunner) the
// leader saw turn busy: its pod, the record's UID (the pod's controller),
// and when.
type jobStart struct {
	pod types.NamespacedName
	uid types.UID
	at  time.Time
}

// turnedBusy reports whether a record's update is its job's assignment:
// no job before, one now.
func turnedBusy(k fleet.RecordKeeper, before, after *unstructured.Unstructured) bool {
	was, _ := k.JudgeRecord(before, before.GetUID())
	is, _ := k.JudgeRecord(after, after.GetUID())
	return was == runnerpod.JobNone && is == runnerpod.JobAssigned
}

// JobStamper writes runnerguard.io/job-assigned-at on the pod of a runner
// whose job the leader saw begin in its fleet's record (ARC's
// EphemeralRunner): the one writer of that annotation, which the chart's
// policy lets no one else change. A pod whose controller is not that
// record, or that has the annotation already, is left alone.
type JobStamper struct {
	Reader client.Reader
	Writer client.Client
}

// stamp writes s's time on its pod.
func (j JobStamper) stamp(ctx context.Context, s jobStart) error {
	pod := &corev1.Pod{}
	if err := j.Reader.Get(ctx, s.pod, pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	if c := metav1.GetControllerOfNoCopy(pod); c == nil || c.UID != s.uid {
		return nil
	}
	if _, done := pod.Annotations[runnerpod.JobAssignedAt]; done {
		return nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": pod.UID,
		"annotations": map[string]string{runnerpod.JobAssignedAt: s.at.UTC().Format(time.RFC3339)}}})
	if err != nil {
		return err
	}
	target := runnerpod.Meta()
	target.Namespace, target.Name = pod.Namespace, pod.Name
	err = j.Writer.Patch(ctx, target, client.RawPatch(types.MergePatchType, body))
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}

// stampAll writes each job start handed over until ctx ends.
func (j JobStamper) stampAll(ctx context.Context, starts <-chan jobStart) {
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-starts:
			if err := j.stamp(ctx, s); err != nil {
				logf.FromContext(ctx).Error(err, "cannot write when the runner's job began; its record will not say", "pod", s.pod)
			}
		}
	}
}

// noteStart hands the stamper a record that turned busy, if it has room: a start it has no room for goes unwritten.
func (e *Records) noteStart(before, after any) {
	b, okB := before.(*unstructured.Unstructured)
	a, okA := after.(*unstructured.Unstructured)
	if e.stamper == nil || !okB || !okA || !turnedBusy(e.keeper, b, a) {
		return
	}
	select {
	case e.starts <- jobStart{pod: e.keeper.RecordPod(a), uid: a.GetUID(), at: time.Now()}:
	default:
	}
}
