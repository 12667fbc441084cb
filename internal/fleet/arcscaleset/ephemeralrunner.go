package arcscaleset

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// ReadRecord reads the EphemeralRunner that owns the pod, through r
// (uncached, by name: a stale one would misjudge), and judges it
// (JobSignal). A pod no EphemeralRunner owns says JobNotRead; one that
// cannot be read, or is not the pod's owner by UID, says JobUnreadable
// (taken to be busy) with the error, which the caller logs in its words.
func (Fleet) ReadRecord(ctx context.Context, r client.Reader, pod *corev1.Pod) (fleet.Record, error) {
	ref := OwnerRef(pod)
	if ref.Name == "" {
		return fleet.Record{Signal: runnerpod.JobNotRead}, nil
	}
	er := &unstructured.Unstructured{}
	er.SetGroupVersionKind(GVK)
	if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, er); err != nil {
		return fleet.Record{Signal: runnerpod.JobUnreadable}, err
	}
	if er.GetUID() != ref.UID {
		return fleet.Record{Signal: runnerpod.JobUnreadable}, fmt.Errorf("%w: owner UID %s, found UID %s", fleet.ErrNotOwner, ref.UID, er.GetUID())
	}
	signal, deleting := JobSignal(er, ref.UID)
	return fleet.Record{Signal: signal, Deleting: deleting, Job: Job(er)}, nil
}

// RecordRef is the pod's EphemeralRunner (OwnerRef).
func (Fleet) RecordRef(pod *corev1.Pod) metav1.OwnerReference { return OwnerRef(pod) }

// JobSignal is the job signal of an ARC scale-set pod's EphemeralRunner
// er, whose UID the pod's ownerReference names as owner; and whether er
// is being deleted. ARC's listener writes the assigned job into its status
// (jobRequestId; jobId in newer releases); none means idle. ARC never
// clears it after the job, but once the EphemeralRunner's deletion began
// it removes the runner from the Actions service (which refuses while the
// job runs) and only then its registration finalizer: a deleting
// EphemeralRunner without that finalizer says the job is over; one that
// never had a job is idle, being removed or not (scale-down). An
// EphemeralRunner whose UID is not owner (an idle runner of the same name
// recreated, or a reference re-pointed at one) says nothing of the pod's
// job: unreadable, which is busy.
func JobSignal(er *unstructured.Unstructured, owner types.UID) (runnerpod.JobSignal, bool) {
	if er == nil || er.GetUID() != owner {
		return runnerpod.JobUnreadable, false
	}
	deleting := er.GetDeletionTimestamp() != nil
	reqID, _, _ := unstructured.NestedFieldNoCopy(er.Object, "status", "jobRequestId")
	jobID, _, _ := unstructured.NestedString(er.Object, "status", "jobId")
	if jobID == "" && !nonZero(reqID) {
		// Never a job (ARC never clears one): idle, also while its fleet
		// removes it on scale-down; no job is over.
		return runnerpod.JobNone, deleting
	}
	if deleting && !slices.Contains(er.GetFinalizers(), RegistrationFinalizer) {
		return runnerpod.JobOver, true
	}
	return runnerpod.JobAssigned, deleting
}

func nonZero(v any) bool {
	switch n := v.(type) {
	case int64:
		return n != 0
	case float64:
		return n != 0
	case string:
		return n != "" && n != "0"
	}
	return false
}
