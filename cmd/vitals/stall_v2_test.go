//go:build qemu

package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/vitals/record"
	"github.com/runnerguard/runnerguard/vitals/stall"
)

const (
	briefCtr = "b1ef0000000000000000000000000000000000000000000000000000000000b1"
	heldCtr  = "4e1d0000000000000000000000000000000000000000000000000000000000e1"
)

// TestStallV2 reads the stall half of the VM's run (hack/qemu-v2-init.sh):
// a container held at its memory.high by an allocation loop, no kill, is
// told stalled within the window on the line and by the readiness probe;
// one that only touched the limit is not; the final reading keeps the
// stall; the sidecar's CPU and memory over the stall are reported.
func TestStallV2(t *testing.T) {
	vm, _ := bootV2(t)
	parse := func(k string) time.Time {
		ts, err := time.Parse(time.RFC3339Nano, vm["stall/"+k])
		require.NoError(t, err, k)
		return ts
	}
	heldStart, toldAt := parse("held-start"), parse("told")
	briefFor := parse("brief-end").Sub(parse("brief-start"))
	require.Less(t, briefFor, stall.Default.Span/2, "the touch is brief")

	var first *record.Line
	for l := range strings.Lines(vm["stall/stdout"]) {
		var r record.Line
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		if s := r.Stall; s != nil {
			assert.NotEqual(t, briefCtr, s.Container, "a brief touch of the limit is not a stall: %s", l)
			if first == nil {
				first = &r
			}
		}
	}
	require.NotNil(t, first, "the held container is told stalled: %s", vm["stall/stdout"])
	t.Logf("stall line: %s", mustJSON(*first))
	assert.Equal(t, record.TriggerStall, first.Trigger)
	assert.Equal(t, heldCtr, first.Stall.Container)
	assert.Equal(t, stall.BasisPressure, first.Stall.Basis)
	after := first.Time.Sub(heldStart)
	t.Logf("held from %s; told after %v; stall began %v after", heldStart, after, first.Stall.Began.Sub(heldStart))
	assert.LessOrEqual(t, after, stall.Default.Span+2*stall.Default.Tolerance, "told within the window")
	assert.False(t, toldAt.Before(first.Time.Truncate(time.Second)))

	assert.Contains(t, vm["stall/ready"], "503", "the readiness probe fails while it stalls")
	assert.Equal(t, "ok\nwget exit 0", vm["stall/ready-after"], "and passes once it ended")

	final, err := record.ParseFinal(vm["stall/termination-log"])
	require.NoError(t, err)
	require.NotNil(t, final.Stall, "the final reading keeps the stall")
	assert.Equal(t, first.Stall.Began, final.Stall.Began)

	// The sidecar's own cost over the stall, in the emulated VM (no KVM:
	// every instruction is translated, so CPU reads many times a native run).
	ticks := func(k string) int {
		f := strings.Fields(vm["stall/"+k])
		require.Len(t, f, 2, k)
		u, err1 := strconv.Atoi(f[0])
		s, err2 := strconv.Atoi(f[1])
		require.NoError(t, err1)
		require.NoError(t, err2)
		return u + s
	}
	t.Logf("sidecar CPU over the stall (emulated): %d ticks of 10ms; %s", ticks("cpu-after")-ticks("cpu-before"), strings.ReplaceAll(vm["stall/rss"], "\n", ", "))
	t.Logf("held container's memory.events: %s", strings.ReplaceAll(vm["stall/held/memory.events"], "\n", ", "))
}
