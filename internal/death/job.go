package death

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// JobLabel is the RunnerDeath label holding the job's id, when the id is a
// valid label value: the API server filters records by it (deaths --job).
const JobLabel = "runnerguard.io/job"

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
