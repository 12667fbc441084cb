package arcscaleset

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// written is a managed-fields entry of manager, dated at, owning
// status.<fields>.
func written(manager string, at time.Time, fields ...string) metav1.ManagedFieldsEntry {
	raw := `{"f:status":{`
	for i, f := range fields {
		if i > 0 {
			raw += ","
		}
		raw += `"f:` + f + `":{}`
	}
	raw += `}}`
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status",
		Time: &metav1.Time{Time: at}, FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(raw)}}
}

func TestZombie(t *testing.T) {
	created := podtest.Start
	job := map[string]any{"jobRequestId": int64(7), "jobId": "j", "jobDisplayName": "build"}
	withFields := func(status map[string]any, entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
		er := ephemeralRunner("er-r", status)
		er.SetManagedFields(entries)
		return er
	}
	cases := []struct {
		name string
		er   *unstructured.Unstructured
		want bool
	}{
		{"a job given to this runner, quiet for an hour since: busy, never a zombie",
			withFields(job, written("ghalistener", created.Add(40*time.Second), "jobRequestId", "jobId", "jobDisplayName")), false},
		{"a job given an hour after the pod came (a runner that waited, a job waiting on a slow service): busy",
			withFields(job, written("ghalistener", created.Add(time.Hour), "jobRequestId", "jobId")), false},
		{"a job given in the second the pod was created: not known to be before it, busy",
			withFields(job, written("ghalistener", created, "jobRequestId", "jobId")), false},
		{"a job given before this pod was created: it went to an earlier pod, a spent configuration",
			withFields(job, written("ghalistener", created.Add(-10*time.Minute), "jobRequestId", "jobId")), true},
		{"the job written again since by another manager: dated by its first write, still spent",
			withFields(job, written("ghalistener", created.Add(-10*time.Minute), "jobRequestId"), written("kubectl", created.Add(time.Hour), "jobRequestId")), true},
		{"only ARC's controller wrote the status before the pod (phase, runnerId): the job came after, busy",
			withFields(job, written("manager", created.Add(-time.Minute), "phase", "runnerId"), written("ghalistener", created.Add(time.Minute), "jobId")), false},
		{"a job whose write is not dated: nothing shown, busy", withFields(job), false},
		{"no job before the pod: idle, never a zombie",
			withFields(map[string]any{"phase": "Running"}, written("manager", created.Add(-time.Minute), "phase")), false},
		{"no record read", nil, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := podtest.ARCScaleSet("ci", "r").Running("runner").Obj()
			pod.CreationTimestamp = metav1.Time{Time: created}
			if tc.er != nil {
				pod.OwnerReferences[0].UID = tc.er.GetUID()
			}
			z, ok := fleet.ZombieOf(Fleet{}, tc.er, pod)
			assert.Equal(t, tc.want, ok)
			if tc.want {
				assert.Equal(t, runnerpod.Zombie{Kind: SpentConfig, Since: created}, z)
				assert.NotEmpty(t, Fleet{}.Traits().Zombies[z.Kind])
			}
		})
	}
}

func TestZombieOfAnotherRunnersRecord(t *testing.T) {
	pod := podtest.ARCScaleSet("ci", "r").Running("runner").Obj()
	pod.CreationTimestamp = metav1.Time{Time: podtest.Start}
	er := ephemeralRunner("other-uid", map[string]any{"jobId": "j"})
	er.SetManagedFields([]metav1.ManagedFieldsEntry{written("ghalistener", podtest.Start.Add(-time.Hour), "jobId")})
	_, ok := fleet.ZombieOf(Fleet{}, er, pod)
	assert.False(t, ok, "a record the pod's reference does not name by UID says nothing of it")
}
