package stall_test

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/vitals/record"
	"github.com/runnerguard/runnerguard/vitals/stall"
)

// The sidecar's lines from a real cgroup v2 kernel (6.1, under qemu; the
// vitals-v2 run): a pod whose container "brief" touched its 30M memory.high
// once (a 31M buffer, 18:26:21.8 to 18:26:23.4), and whose container
// "held" allocated 40M buffers in a loop from 18:26:32.5, throttled by the
// kernel without end, until it was killed at about 18:28:43.
const (
	brief = "b1ef0000000000000000000000000000000000000000000000000000000000b1"
	held  = "4e1d0000000000000000000000000000000000000000000000000000000000e1"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestARecordedStallAtMemoryHighIsToldWithinTheWindowAndTheTouchIsNot(t *testing.T) {
	f, err := os.Open("testdata/qemu-v2-memory-high.jsonl")
	require.NoError(t, err)
	defer f.Close()
	judges := map[string]*stall.Judge{brief: stall.New(stall.Default), held: stall.New(stall.Default), "": stall.New(stall.Default)}
	told := map[string]*stall.Stall{}
	toldAt := map[string]time.Time{}
	var last map[string]stall.Verdict
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l record.Line
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		last = map[string]stall.Verdict{}
		for id, j := range judges {
			m := l.Pod
			if id != "" {
				m = l.Containers[id]
			}
			v := j.Observe(stall.FromMemory(l.Time, m))
			last[id] = v
			if v.Stalled != nil && told[id] == nil {
				told[id], toldAt[id] = v.Stalled, l.Time
			}
		}
	}
	require.NoError(t, sc.Err())

	assert.Nil(t, told[brief], "a touch of memory.high is not a stall")
	start := at("2026-11-27T18:26:32.547Z")
	for _, id := range []string{held, ""} {
		require.NotNil(t, told[id], "the held container, and the pod around it, are stalled")
		assert.False(t, told[id].Began.Before(start), "not before the loop began: %v", told[id].Began)
		assert.Less(t, told[id].Began.Sub(start), 5*time.Second, "from its first reading")
		assert.LessOrEqual(t, toldAt[id].Sub(start), stall.Default.Span+2*stall.Default.Tolerance,
			"told within the window: the span, and a reading or two")
		assert.InDelta(t, 100, *told[id].WorstFull, 1)
		assert.NotNil(t, last[id].Stalled, "under way at the final reading, seven seconds after the kill")
	}
	t.Logf("held: began %v, told %v after the loop began", told[held].Began.Sub(start), toldAt[held].Sub(start))
}
