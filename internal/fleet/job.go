package fleet

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

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

// head is the first max bytes of s, cut at a character boundary (the
// fields come from JSON, so they are valid UTF-8 but for the cut).
func head(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "")
}
