package arcscaleset

import (
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

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
