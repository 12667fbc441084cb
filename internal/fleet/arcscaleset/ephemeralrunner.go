package arcscaleset

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

var _ fleet.RecordKeeper = Fleet{}

// RecordResource is ARC's EphemeralRunners.
func (Fleet) RecordResource() schema.GroupVersionResource { return GVR }

// RecordRef is the pod's EphemeralRunner (OwnerRef).
func (Fleet) RecordRef(pod *corev1.Pod) metav1.OwnerReference { return OwnerRef(pod) }

// RecordPod is the EphemeralRunner's pod: ARC names it after the
// EphemeralRunner.
func (Fleet) RecordPod(er metav1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: er.GetNamespace(), Name: er.GetName()}
}

// JudgeRecord is JobSignal.
func (Fleet) JudgeRecord(er *unstructured.Unstructured, owner types.UID) (runnerpod.JobSignal, bool) {
	return JobSignal(er, owner)
}

// RecordJob is Job.
func (Fleet) RecordJob(er *unstructured.Unstructured) *v1alpha1.Job { return Job(er) }

// statusFields are the EphemeralRunner's status fields JobSignal and Job
// read.
var statusFields = []string{"jobRequestId", "jobId", "workflowRunId", "jobRepositoryName", "jobWorkflowRef", "jobDisplayName"}

// RecordFields are the status fields JobSignal and Job read.
func (Fleet) RecordFields() []string { return statusFields }

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
