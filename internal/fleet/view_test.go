package fleet_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/fleet/buildkite"
	"github.com/runnerguard/runnerguard/internal/fleet/tekton"
)

func owner(kind, name string, conds ...map[string]any) *unstructured.Unstructured {
	o := &unstructured.Unstructured{Object: map[string]any{}}
	o.SetKind(kind)
	o.SetName(name)
	if conds != nil {
		list := make([]any, len(conds))
		for i, c := range conds {
			list[i] = c
		}
		_ = unstructured.SetNestedSlice(o.Object, list, "status", "conditions")
	}
	return o
}

func cond(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "lastTransitionTime": "2026-12-07T10:00:00Z"}
}

func TestOwnViewIsTheSystemsFinalAccount(t *testing.T) {
	taskRun := *tekton.Fleet{}.Traits().OwnView
	job := *buildkite.Fleet{}.Traits().OwnView
	cases := []struct {
		name   string
		view   fleet.OwnView
		owner  *unstructured.Unstructured
		want   string // "" for none yet
		reason string
	}{
		{"a TaskRun that runs has no account yet", taskRun, owner("TaskRun", "t", cond("Succeeded", "Unknown", "Running", "Not all Steps have completed")), "", ""},
		{"nor one Tekton has not looked at", taskRun, owner("TaskRun", "t"), "", ""},
		{"a TaskRun told succeeded", taskRun, owner("TaskRun", "t", cond("Succeeded", "True", "Succeeded", "All Steps have completed executing")), "Succeeded=True", "Succeeded"},
		{"a cancelled TaskRun", taskRun, owner("TaskRun", "t", cond("Succeeded", "False", "TaskRunCancelled", "TaskRun \"t\" was cancelled")), "Succeeded=False", "TaskRunCancelled"},
		{"a Job that still runs has none", job, owner("Job", "buildkite-1", cond("SuccessCriteriaMet", "True", "", "")), "", ""},
		{"a Job past its deadline failed", job, owner("Job", "buildkite-1", cond("FailureTarget", "True", "DeadlineExceeded", ""), cond("Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline")), "Failed=True", "DeadlineExceeded"},
		{"a Job that completed", job, owner("Job", "buildkite-1", cond("Complete", "True", "", "")), "Complete=True", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.view.Of(tc.owner)
			if tc.want == "" {
				assert.Nil(t, v)
				return
			}
			if assert.NotNil(t, v) {
				assert.Equal(t, tc.want, v.Condition+"="+v.Status)
				assert.Equal(t, tc.reason, v.Reason)
				assert.Equal(t, tc.owner.GetKind()+"/"+tc.owner.GetName(), v.Object)
				assert.NotNil(t, v.At)
			}
		})
	}
}

// What the system wrote is kept within the record's bounds, as valid text.
func TestOwnViewKeepsAMessageWithinItsBound(t *testing.T) {
	v := tekton.Fleet{}.Traits().OwnView.Of(owner("TaskRun", "t", cond("Succeeded", "False", "Failed", strings.Repeat("é", 1000))))
	assert.LessOrEqual(t, len(v.Message), 1024)
	assert.True(t, strings.HasPrefix(strings.Repeat("é", 1000), v.Message))
}

func TestOwnViewOwnsOnlyItsKind(t *testing.T) {
	v := *tekton.Fleet{}.Traits().OwnView
	assert.True(t, v.Owns(&metav1.OwnerReference{APIVersion: "tekton.dev/v1", Kind: "TaskRun"}))
	assert.True(t, v.Owns(&metav1.OwnerReference{APIVersion: "tekton.dev/v1beta1", Kind: "TaskRun"}), "any version of the kind")
	assert.False(t, v.Owns(&metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "TaskRun"}), "another group's TaskRun")
	assert.False(t, v.Owns(&metav1.OwnerReference{APIVersion: "tekton.dev/v1", Kind: "PipelineRun"}))
	assert.False(t, v.Owns(nil))
}

// Anyone who may create pods may name any owner: the owner's account is
// the pod's only where the owner names the pod (Tekton) or the job
// controller created it (a Job's).
func TestOwnViewIsAPodsOnlyWhereItsOwnerStandsForIt(t *testing.T) {
	tr := owner("TaskRun", "t", cond("Succeeded", "True", "Succeeded", ""))
	_ = unstructured.SetNestedField(tr.Object, "t-pod", "status", "podName")
	taskRun := *tekton.Fleet{}.Traits().OwnView
	assert.NotNil(t, taskRun.OfPod(tr, "t-pod", "anyone"))
	assert.Nil(t, taskRun.OfPod(tr, "an-editors-pod", "anyone"), "the TaskRun names another pod")
	job := *buildkite.Fleet{}.Traits().OwnView
	j := owner("Job", "buildkite-1", cond("Complete", "True", "", ""))
	assert.NotNil(t, job.OfPod(j, "buildkite-1-x", "system:serviceaccount:kube-system:job-controller"))
	assert.Nil(t, job.OfPod(j, "buildkite-1-x", "system:serviceaccount:ci:reaper"), "a pod the job controller did not create")
}
