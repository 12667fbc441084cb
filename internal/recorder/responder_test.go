package recorder

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestTheResponderHoldsABusyRunnerOnlyWhereTheGuardEnforces(t *testing.T) {
	now := podtest.Start.Add(time.Minute)
	pod := podtest.Runner("ci", "r").RunningSince("runner", podtest.Start).Obj()
	run, ok := presets.Match(pod, configtest.Enforcing().Presets)
	require.True(t, ok)
	for _, c := range []struct {
		name string
		f    Facts
		busy bool
		why  string
	}{
		{name: "enforce: held", f: Facts{Selected: true, Enforce: true, Job: runnerpod.JobNotRead, Now: now}, busy: true},
		{name: "warn: let go, saying what enforce would do", f: Facts{Selected: true, Job: runnerpod.JobNotRead, Now: now},
			why: "the guard is in warn mode in its namespace; enforce mode would hold it until its job ends"},
		{name: "switched off: let go", f: Facts{Selected: true, Released: true, Now: now}, why: "the guard is switched off in its namespace"},
		{name: "not opted in: let go", f: Facts{Now: now}, why: "its namespace is not one runnerguard protects"},
	} {
		t.Run(c.name, func(t *testing.T) {
			j, why := holds(pod, run, c.f)
			assert.Equal(t, c.busy, j.Busy)
			assert.Equal(t, c.why, why)
		})
	}
}
