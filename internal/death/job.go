package death

import (
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
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
