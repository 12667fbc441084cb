package death

import (
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// JobLabel is the RunnerDeath label holding the job's id, when the id is a
// valid label value: the API server filters records by it (deaths --job).
const JobLabel = "runnerguard.io/job"

// maxJobField bounds each job field: annotations have no size of their own.
const maxJobField = 512

// Job sources (v1alpha1.Job.Source).
const (
	JobFromPodMarks = "pod"
	jobFromERPrefix = "EphemeralRunner/"
)

// JobFromPod is the job the pod's labels and annotations state under keys,
// or nil when they state none.
func JobFromPod(pod *corev1.Pod, keys runnerpod.JobKeys) *v1alpha1.Job {
	v := func(k runnerpod.PodKey) string { return head(k.Value(pod.Labels, pod.Annotations), maxJobField) }
	j := &v1alpha1.Job{ID: v(keys.ID), Project: v(keys.Project), Name: v(keys.Name), URL: v(keys.URL), Source: JobFromPodMarks}
	if *j == (v1alpha1.Job{Source: JobFromPodMarks}) {
		return nil
	}
	j.CreatedBy = head(pod.Annotations[runnerpod.CreatedBy], maxJobField)
	return j
}

// JobFromEphemeralRunner is the job an ARC EphemeralRunner's status names
// (actions.github.com/v1alpha1 EphemeralRunnerStatus: jobId, jobRequestId,
// workflowRunId, jobRepositoryName, jobWorkflowRef, jobDisplayName), or nil
// when it names none (the runner was idle). The caller has checked that er
// is the pod's owner by UID.
func JobFromEphemeralRunner(er *unstructured.Unstructured) *v1alpha1.Job {
	str := func(field string) string {
		s, _, _ := unstructured.NestedString(er.Object, "status", field)
		return head(s, maxJobField)
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
	j.Source = jobFromERPrefix + er.GetName()
	return j
}

// jobLabelValue is the job's id as a label value, or "" when it cannot be
// one (a RunnerDeath is still written; only --job cannot find it).
func jobLabelValue(j *v1alpha1.Job) string {
	if j == nil || j.ID == "" || len(validation.IsValidLabelValue(j.ID)) > 0 {
		return ""
	}
	return j.ID
}

// jobStart is when the runner's job began, where the cluster tells it from
// the runner's start: an ARC scale-set runner's from when the leader saw
// its EphemeralRunner turn busy (runnerpod.JobAssignedAt, which only
// runnerguard writes); a GitLab build pod's from its start (it exists for
// one job); nil otherwise.
func jobStart(pod *corev1.Pod, preset runnerpod.PresetName) *metav1.Time {
	switch preset {
	case runnerpod.ARCScaleSet:
		if at, err := time.Parse(time.RFC3339, pod.Annotations[runnerpod.JobAssignedAt]); err == nil {
			return &metav1.Time{Time: at}
		}
	case runnerpod.GitLab:
		if st := pod.Status.StartTime; st != nil && !st.IsZero() {
			return st.DeepCopy()
		}
	}
	return nil
}
