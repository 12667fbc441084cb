package arcscaleset

import (
	"slices"
	"strconv"

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

// Job is the job an ARC EphemeralRunner's status names
// (actions.github.com/v1alpha1 EphemeralRunnerStatus: jobId, jobRequestId,
// workflowRunId, jobRepositoryName, jobWorkflowRef, jobDisplayName), or nil
// when it names none (the runner was idle). The caller has checked that er
// is the pod's owner by UID.
func Job(er *unstructured.Unstructured) *v1alpha1.Job {
	str := func(field string) string {
		s, _, _ := unstructured.NestedString(er.Object, "status", field)
		return runnerpod.JobField(s)
	}
	num := func(field string) string {
		v, ok, _ := unstructured.NestedFieldNoCopy(er.Object, "status", field)
		if !ok {
			return ""
		}
		switch n := v.(type) {
		case int64:
			return strconv.FormatInt(n, 10)
		case float64:
			return strconv.FormatFloat(n, 'f', -1, 64)
		}
		return ""
	}
	j := &v1alpha1.Job{ID: str("jobId"), RequestID: num("jobRequestId"), Run: num("workflowRunId"),
		Project: str("jobRepositoryName"), Workflow: str("jobWorkflowRef"), Name: str("jobDisplayName")}
	if *j == (v1alpha1.Job{}) {
		return nil
	}
	j.Source = fleet.RecordSource(Kind, er.GetName())
	return j
}

// OwnerName returns the name of the EphemeralRunner that controls the pod,
// or "" when none does.
func OwnerName(pod *corev1.Pod) string { return OwnerRef(pod).Name }

// OwnerRef returns the controller reference to the pod's EphemeralRunner,
// or a zero reference when none controls it.
func OwnerRef(pod *corev1.Pod) metav1.OwnerReference {
	for _, o := range pod.OwnerReferences {
		if o.Controller == nil || !*o.Controller || o.Kind != Kind {
			continue
		}
		if gv, err := schema.ParseGroupVersion(o.APIVersion); err == nil && gv.Group == Group {
			return o
		}
	}
	return metav1.OwnerReference{}
}
