package arcscaleset

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func ephemeralRunner(uid string, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace("ci")
	u.SetName("r")
	u.SetUID(types.UID(uid))
	return u
}

func TestReadRecord(t *testing.T) {
	busy := map[string]any{"jobRequestId": int64(7), "jobDisplayName": "build"}
	idleOther := ephemeralRunner("er-idle", nil)
	idleOther.SetName("idle")
	cases := []struct {
		name     string
		er       *unstructured.Unstructured
		noOwner  bool
		want     fleet.Record
		wantErr  bool
		notOwner bool
	}{
		{name: "a pod no EphemeralRunner owns is not read", noOwner: true, want: fleet.Record{Signal: runnerpod.JobNotRead}},
		{name: "an EphemeralRunner with a job says so and names it", er: ephemeralRunner("er-r", busy),
			want: fleet.Record{Signal: runnerpod.JobAssigned, Job: &v1alpha1.Job{RequestID: "7", Name: "build", Source: "EphemeralRunner/r"}}},
		{name: "an EphemeralRunner that never had a job is idle", er: ephemeralRunner("er-r", nil), want: fleet.Record{Signal: runnerpod.JobNone}},
		{name: "a missing EphemeralRunner is unreadable, so busy", wantErr: true, want: fleet.Record{Signal: runnerpod.JobUnreadable}},
		{name: "an EphemeralRunner of that name with another UID says nothing of the pod's job", er: ephemeralRunner("other", busy),
			wantErr: true, notOwner: true, want: fleet.Record{Signal: runnerpod.JobUnreadable}},
		{name: "a reference re-pointed at another runner's live, idle EphemeralRunner (its real name and UID) says nothing of this pod's job",
			er: idleOther, wantErr: true, notOwner: true, want: fleet.Record{Signal: runnerpod.JobUnreadable}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder()
			if tc.er != nil {
				b = b.WithObjects(tc.er)
			}
			pod := podtest.ARCScaleSet("ci", "r").Running("runner").Obj()
			if tc.noOwner {
				pod.OwnerReferences = nil
			}
			if tc.er != nil && tc.er.GetName() != "r" {
				pod.OwnerReferences[0].Name, pod.OwnerReferences[0].UID = tc.er.GetName(), tc.er.GetUID()
			}
			got, err := fleet.ReadRecord(context.Background(), b.Build(), Fleet{}, pod)
			assert.Equal(t, tc.want, got)
			if !tc.wantErr {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.notOwner, errors.Is(err, fleet.ErrNotOwner))
		})
	}
}

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
