package guard

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runnerguard/runnerguard/internal/podtest"
)

// The EphemeralRunner room judges nothing else: a busy runner pod's delete
// sent to its path is allowed untouched (no Event, no note), as the pod
// guard's path would refuse it.
func TestTheEphemeralRunnerRoomNotesOnlyEphemeralRunnerDeletes(t *testing.T) {
	pod := podtest.Runner("ci", "busy").Running("runner").Obj()
	h, rec := newTestHandler(pod)
	resp := h.EphemeralRunners().Handle(context.Background(), deleteReq(t, pod, reaper, false, nil))
	assert.True(t, resp.Allowed, "a pod's delete is not this room's to judge")
	assert.Empty(t, drain(rec))
	assert.Nil(t, deletionNote(t, h, pod))
	assert.False(t, serve(t, h, deleteReq(t, pod, reaper, false, nil)).Allowed, "the pod guard refuses it")
}
