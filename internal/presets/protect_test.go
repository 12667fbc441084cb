package presets_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/fleet/arclegacy"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/podtest"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// TestProtected: the guard's pod-level rules, for every preset: busy while
// the runner runs with a job by the fleet's own signal, until the cap or
// the pod's deadline, whichever comes first; free otherwise.
func TestProtected(t *testing.T) {
	now := podtest.Start.Add(41 * time.Minute)
	week := 168 * time.Hour
	cases := []struct {
		name  string
		pod   *corev1.Pod
		job   runnerpod.JobSignal
		busy  bool
		until time.Time
	}{
		{name: "generic: a running runner is busy until its preset's cap",
			pod: podtest.Runner("ci", "r").Running("runner").Obj(), busy: true, until: podtest.Start.Add(week)},
		{name: "generic: not started is free",
			pod: podtest.Runner("ci", "r").Waiting("runner", "ContainerCreating").Obj()},
		{name: "generic: ended is free",
			pod: podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").Obj()},
		{name: "generic: a runner waiting to restart counts as ended",
			pod: podtest.Runner("ci", "r").Restarting("runner", 1, "Error").Obj()},
		{name: "a finished pod is free",
			pod: podtest.Runner("ci", "r").Terminated("runner", 0, "Completed").Phase(corev1.PodSucceeded).Obj()},
		{name: "a terminating pod is free",
			pod: podtest.Runner("ci", "r").Running("runner").Terminating(now).Obj()},
		{name: "the override frees it",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, "drain").Obj()},
		{name: "an empty override does not",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(runnerpod.AllowDelete, " ").Obj(), busy: true, until: podtest.Start.Add(week)},
		{name: "past the cap it is free",
			pod: podtest.Runner("ci", "r").RunningSince("runner", now.Add(-week-time.Second)).Obj()},
		{name: "at the cap's end it is still protected (whole seconds past the cap count)",
			pod: podtest.Runner("ci", "r").RunningSince("runner", now.Add(-week)).Obj(), busy: true, until: now},
		{name: "arc-scale-set: a job assigned is busy",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), job: runnerpod.JobAssigned, busy: true, until: podtest.Start.Add(week)},
		{name: "arc-scale-set: an unreadable EphemeralRunner is taken to be busy",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), job: runnerpod.JobUnreadable, busy: true, until: podtest.Start.Add(week)},
		{name: "arc-scale-set: no job is idle",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), job: runnerpod.JobNone},
		{name: "arc-scale-set: the job over is free",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Obj(), job: runnerpod.JobOver},
		{name: "arc-legacy: registered is busy",
			pod: podtest.ARCLegacy("ci", "r").Running("runner").Obj(), busy: true, until: podtest.Start.Add(week)},
		{name: "arc-legacy: unregistered is idle",
			pod: podtest.ARCLegacy("ci", "r").Running("runner").Annotate(arclegacy.Unregistered, "2026-11-01T12:30:00Z").Obj()},
		{name: "arc-workflow: a running job is busy for up to 5 days",
			pod: podtest.ARCWorkflow("ci", "r").Running("job").Obj(), busy: true, until: podtest.Start.Add(120 * time.Hour)},
		{name: "gitlab: a running build is busy until the pod's own deadline when sooner",
			pod: podtest.GitLab("ci", "g").Running("build").ActiveDeadline(3600, podtest.Start).Obj(), busy: true, until: podtest.Start.Add(time.Hour)},
		{name: "gitlab: past its deadline it is free",
			pod: podtest.GitLab("ci", "g").Running("build").ActiveDeadline(600, podtest.Start).Obj()},
		{name: "generic: a runner its pool says is idle is free",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(generic.IdleAnnotation, "true").Obj()},
		{name: "generic: a runner its pool holds a lease on is busy until the lease lapses",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(generic.IdleAnnotation, now.Add(5*time.Minute).Format(time.RFC3339)).Obj(), busy: true, until: now.Add(5 * time.Minute)},
		{name: "generic: once its lease lapsed (the pool stopped renewing it), it is free",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(generic.IdleAnnotation, now.Format(time.RFC3339)).Obj()},
		{name: "generic: a lease past the cap leaves the cap in force",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(generic.IdleAnnotation, podtest.Start.Add(2*week).Format(time.RFC3339)).Obj(), busy: true, until: podtest.Start.Add(week)},
		{name: "generic: any other value of the pool's word is busy",
			pod: podtest.Runner("ci", "r").Running("runner").Annotate(generic.IdleAnnotation, "yes").Obj(), busy: true, until: podtest.Start.Add(week)},
		{name: "a runner the leader named a zombie is free: its eviction passes for anyone",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Annotate(runnerpod.ZombieAnnotation, "spent-config 2026-11-01T12:00:00Z").Obj(), job: runnerpod.JobAssigned},
		{name: "a zombie name that does not parse frees nothing",
			pod: podtest.ARCScaleSet("ci", "r").Running("runner").Annotate(runnerpod.ZombieAnnotation, "spent-config").Obj(), job: runnerpod.JobAssigned, busy: true, until: podtest.Start.Add(week)},
		{name: "gitlab: only the helper running is not started",
			pod: podtest.GitLab("ci", "g").Running("helper").Obj()},
	}
	ps := presets.Defaults()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := presets.Match(tc.pod, ps)
			require.True(t, ok)
			p := presets.Protected(tc.pod, r, tc.job, now)
			assert.Equal(t, tc.busy, p.Busy)
			assert.True(t, tc.until.Equal(p.Until), "until %s, want %s", p.Until, tc.until)
		})
	}
}

// Every fleet's zombie rule: a running runner of any fleet, with no
// evidence in its fleet's objects (no record, or a record that is not its
// own), is never a zombie, and every kind a fleet can name says what it
// means.
func TestNoFleetTakesARunnerWithoutEvidenceForAZombie(t *testing.T) {
	for _, f := range presets.All {
		t.Run(string(f.Name()), func(t *testing.T) {
			pod := podtest.Runner("ci", "r").Obj()
			pod.Spec.Containers[0].Name = f.Defaults().RunnerContainers[0]
			f.Sample(pod)
			pod.Status = podtest.Runner("ci", "r").Running(pod.Spec.Containers[0].Name).Obj().Status
			runner, ok := presets.Match(pod, presets.Defaults())
			require.True(t, ok)
			_, zombie := presets.ZombieOf(pod, runner, nil)
			assert.False(t, zombie)
			for kind, means := range f.Traits().Zombies {
				assert.NotEmpty(t, kind)
				assert.NotEmpty(t, means, "what %s means", kind)
			}
		})
	}
}
