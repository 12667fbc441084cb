package guard

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
)

// The records' room judges nothing else: a busy runner pod's delete sent
// to its path is allowed untouched (no Event, no note), as the pod guard's
// path would refuse it.
func TestTheRecordsRoomNotesOnlyTheDeletesOfItsRecords(t *testing.T) {
	pod := podtest.Runner("ci", "busy").Running("runner").Obj()
	h, rec := newTestHandler(pod)
	resp := h.Records(arcscaleset.Fleet{}).Handle(context.Background(), deleteReq(t, pod, reaper, false, nil))
	assert.True(t, resp.Allowed, "a pod's delete is not this room's to judge")
	assert.Empty(t, drain(rec))
	assert.Nil(t, deletionNote(t, h, pod))
	assert.False(t, serve(t, h, deleteReq(t, pod, reaper, false, nil)).Allowed, "the pod guard refuses it")
}

// The chart registers each fleet's record webhook at RecordPath: ARC's at
// the path its table names.
func TestARCsRecordPathIsTheCharts(t *testing.T) {
	assert.Equal(t, "/note-ephemeralrunner-delete", RecordPath(arcscaleset.Kind))
}

func TestTheNoteOfAnEphemeralRunnersDeletionKeepsTheJobItsStatusNames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		raw    string
		wantID string
	}{
		{"a busy runner's EphemeralRunner names its job", `{"apiVersion":"actions.github.com/v1alpha1","kind":"EphemeralRunner","metadata":{"name":"r","uid":"u"},"status":{"jobRequestId":7,"jobId":"job-7","jobRepositoryName":"org/repo"}}`, "job-7"},
		{"an idle runner's EphemeralRunner names none", `{"apiVersion":"actions.github.com/v1alpha1","kind":"EphemeralRunner","metadata":{"name":"r","uid":"u"},"status":{"runnerId":3}}`, ""},
		{"an object that is not JSON names none", `{"status":`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := RecordHandler{Keeper: arcscaleset.Fleet{}}.jobOf([]byte(tc.raw))
			if tc.wantID == "" {
				assert.Nil(t, j)
				return
			}
			if assert.NotNil(t, j) {
				assert.Equal(t, tc.wantID, j.ID)
				assert.Equal(t, "7", j.RequestID)
				assert.Equal(t, "org/repo", j.Project)
			}
		})
	}
}
