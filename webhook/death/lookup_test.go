package death

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/runnerguard/runnerguard/webhook/config"
	"github.com/runnerguard/runnerguard/webhook/podtest"
	"github.com/runnerguard/runnerguard/webhook/runnerpod"
)

func TestLookupOfAPodThatIsGoneReadsItsEvent(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	pod := podtest.Runner("ci", "r").Terminated("runner", 137, "OOMKilled").Obj()
	runner, _ := runnerpod.Match(pod, config.Default().Presets)
	rc := NewRecorder(c, c, "test")
	wrote, err := rc.Record(context.Background(), pod, New(pod, runner, runnerpod.RunnerStatus(pod, runner.Containers), "reaper"))
	require.NoError(t, err)
	require.True(t, wrote)

	rep, err := Lookup(context.Background(), c, config.Default().Presets, "ci", "r")
	require.NoError(t, err)
	assert.False(t, rep.Exists)
	require.Len(t, rep.Records, 1)
	assert.Equal(t, CgroupOOM, rep.Records[0].Class)
	assert.Equal(t, "reaper", rep.Records[0].DeletedBy)
	text := rep.Text()
	assert.Contains(t, text, `runner "runner" died: cgroup-oom`)
	assert.Contains(t, text, "pod deleted afterwards by reaper")
}

func TestLookupOfALivePodMergesItsStatusWithItsEvent(t *testing.T) {
	pod := podtest.Runner("ci", "r").Terminated("runner", 2, "Error").Obj()
	c := fake.NewClientBuilder().WithObjects(pod).Build()
	rep, err := Lookup(context.Background(), c, config.Default().Presets, "ci", "r")
	require.NoError(t, err)
	assert.True(t, rep.Exists)
	require.Len(t, rep.Records, 1)
	runner, _ := runnerpod.Match(pod, config.Default().Presets)
	_, err = NewRecorder(c, c, "t").Record(context.Background(), pod, New(pod, runner, runnerpod.RunnerStatus(pod, runner.Containers), "bob"))
	require.NoError(t, err)
	rep, err = Lookup(context.Background(), c, config.Default().Presets, "ci", "r")
	require.NoError(t, err)
	require.Len(t, rep.Records, 1, "one death, from status and Event")
	assert.Equal(t, "bob", rep.Records[0].DeletedBy, "the Event's record wins")
}

func TestLookupWithNothingLeftSaysWhereToLook(t *testing.T) {
	rep, err := Lookup(context.Background(), fake.NewClientBuilder().Build(), config.Default().Presets, "ci", "gone")
	require.NoError(t, err)
	assert.Contains(t, rep.Text(), "pod ci/gone is gone and no runnerguard record of it remains")
	assert.Contains(t, rep.Text(), "--event-ttl")
}

func TestLookupOfARunningRunner(t *testing.T) {
	c := fake.NewClientBuilder().WithObjects(podtest.Runner("ci", "r").Running("runner").Obj()).Build()
	rep, err := Lookup(context.Background(), c, config.Default().Presets, "ci", "r")
	require.NoError(t, err)
	assert.Equal(t, "pod ci/r: its runner is running; no death on record\n", rep.Text())
}
