package arcscaleset

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestJobSignal(t *testing.T) {
	er := func(status map[string]any, deleting bool, finalizers ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
		u.SetUID("er-uid")
		u.SetFinalizers(finalizers)
		if deleting {
			u.SetDeletionTimestamp(&metav1.Time{Time: podtest.Start})
		}
		return u
	}
	cases := []struct {
		name     string
		er       *unstructured.Unstructured
		owner    types.UID
		want     runnerpod.JobSignal
		deleting bool
	}{
		{"no job in the status: idle", er(map[string]any{"phase": "Running"}, false, RegistrationFinalizer), "er-uid", runnerpod.JobNone, false},
		{"a jobRequestId: busy", er(map[string]any{"jobRequestId": int64(7)}, false), "er-uid", runnerpod.JobAssigned, false},
		{"a jobRequestId decoded as a float: busy", er(map[string]any{"jobRequestId": float64(7)}, false), "er-uid", runnerpod.JobAssigned, false},
		{"a zero jobRequestId: idle", er(map[string]any{"jobRequestId": int64(0)}, false), "er-uid", runnerpod.JobNone, false},
		{"a jobId alone: busy", er(map[string]any{"jobId": "j"}, false), "er-uid", runnerpod.JobAssigned, false},
		{"deleting with the registration finalizer: still busy, and deleting", er(map[string]any{"jobId": "j"}, true, RegistrationFinalizer), "er-uid", runnerpod.JobAssigned, true},
		{"deleting without it: the job is over", er(map[string]any{"jobId": "j"}, true, "other"), "er-uid", runnerpod.JobOver, true},
		{"deleting without it, never a job: idle, removed on scale-down", er(map[string]any{"phase": "Running"}, true, "other"), "er-uid", runnerpod.JobNone, true},
		{"deleting without it, a zero jobRequestId: idle", er(map[string]any{"jobRequestId": int64(0)}, true), "er-uid", runnerpod.JobNone, true},
		{"another UID than the pod's owner: unreadable", er(map[string]any{}, false), "other-uid", runnerpod.JobUnreadable, false},
		{"none: unreadable", nil, "er-uid", runnerpod.JobUnreadable, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, deleting := JobSignal(tc.er, tc.owner)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.deleting, deleting)
		})
	}
}
