package recorder

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestAnEphemeralRunnerTurnsBusyOnlyWhenItsJobIsAssigned(t *testing.T) {
	er := func(status map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "r", "uid": "er-1"}, "status": status}}
	}
	idle, busy := er(map[string]any{"phase": "Running"}), er(map[string]any{"jobRequestId": int64(7)})
	assert.True(t, turnedBusy(arcscaleset.Fleet{}, idle, busy), "no job, then one")
	assert.False(t, turnedBusy(arcscaleset.Fleet{}, busy, busy), "a later update of a busy runner is not its job's start")
	assert.False(t, turnedBusy(arcscaleset.Fleet{}, idle, idle))
	assert.False(t, turnedBusy(arcscaleset.Fleet{}, busy, idle))
}

// The leader writes when it saw the job begin on the runner's own pod only
// (its owner by UID), once, with the marks the start brings.
func TestTheJobStartIsWrittenOnceOnTheRunnersOwnPod(t *testing.T) {
	w := podtest.ARCScaleSet("ci", "r").Running("runner")
	w.OwnerReferences[0].UID = "er-1"
	pod := w.Obj()
	key := types.NamespacedName{Namespace: "ci", Name: "r"}
	at := time.Date(2026, 11, 1, 12, 3, 0, 0, time.UTC)
	starts := NewJobStarts()

	_, ok := starts.of(pod)
	assert.False(t, ok, "no start seen")
	starts.note(key, jobStart{uid: "other-er", at: at})
	_, ok = starts.of(pod)
	assert.False(t, ok, "another EphemeralRunner's job is not this pod's")

	starts.note(key, jobStart{uid: "er-1", at: at})
	got, ok := starts.of(pod)
	require.True(t, ok)
	assert.Equal(t, "2026-11-01T12:03:00Z", got)
	got, ok = starts.of(pod)
	assert.True(t, ok, "kept until written")
	assert.Equal(t, "2026-11-01T12:03:00Z", got)
	starts.written(key)
	_, ok = starts.of(pod)
	assert.False(t, ok, "written once")

	starts.note(key, jobStart{uid: "er-1", at: at.Add(time.Hour)})
	pod.Annotations = map[string]string{runnerpod.JobAssignedAt: "2026-11-01T12:03:00Z"}
	_, ok = starts.of(pod)
	assert.False(t, ok, "a pod that has one gets none")

	var none *JobStarts
	_, ok = none.of(pod)
	assert.False(t, ok, "no starts kept: none written")
}

// The starts kept are bounded: one beyond the bound goes unwritten, and a
// pod's later start replaces its own.
func TestJobStartsAreBounded(t *testing.T) {
	starts := NewJobStarts()
	for i := range maxJobStarts {
		starts.note(types.NamespacedName{Namespace: "ci", Name: fmt.Sprint(i)}, jobStart{uid: "u"})
	}
	starts.note(types.NamespacedName{Namespace: "ci", Name: "late"}, jobStart{uid: "u"})
	assert.Len(t, starts.starts, maxJobStarts)
	assert.NotContains(t, starts.starts, types.NamespacedName{Namespace: "ci", Name: "late"})
	starts.note(types.NamespacedName{Namespace: "ci", Name: "0"}, jobStart{uid: "v"})
	assert.Equal(t, types.UID("v"), starts.starts[types.NamespacedName{Namespace: "ci", Name: "0"}].uid)
}
