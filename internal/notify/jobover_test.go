package notify

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// A runner's job is asked about only where its death would be told on the
// service, under the same trust in who created the pod.
func TestPlanJobAsk(t *testing.T) {
	off := cfg()
	off.Namespaces = nil
	noGitHub := cfg()
	noGitHub.GitHub = nil
	for _, c := range []struct {
		name string
		cfg  config.Reports
		want Target
		ok   bool
	}{
		{"an ARC runner's job, its EphemeralRunner's word", cfg(), Target{Destination: GitHub, Repository: "acme/app", Run: "900123"}, true},
		{"not where no namespace opted in", off, Target{}, false},
		{"not where reports do not go to GitHub", noGitHub, Target{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := PlanJobAsk(arc("", erJob), c.cfg)
			assert.Equal(t, c.ok, ok)
			assert.Equal(t, c.want, got)
		})
	}
	reaped := *erJob
	reaped.CreatedBy = "system:serviceaccount:ci:reaper"
	_, ok := PlanJobAsk(arc("", &reaped), cfg())
	assert.False(t, ok, "a pod an editor created under the runner's name: its job is not asked after")
	got, ok := PlanJobAsk(build("ci", labJob), cfg())
	assert.True(t, ok)
	assert.Equal(t, Target{Destination: GitLab, Project: "1234", Job: "42"}, got)
	untrusted := *labJob
	untrusted.CreatedBy = "system:serviceaccount:ci:someone"
	_, ok = PlanJobAsk(build("ci", &untrusted), cfg())
	assert.False(t, ok, "a build pod its manager did not create")
}

func TestJobOver(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	ended, created := now.Add(-10*time.Minute), now.Add(-time.Hour)
	z, ok := JobOver(ended, true, created, now, 5*time.Minute)
	assert.True(t, ok)
	assert.Equal(t, runnerpod.Zombie{Kind: runnerpod.JobOverZombie, Since: ended}, z)
	_, ok = JobOver(now.Add(-time.Minute), true, created, now, 5*time.Minute)
	assert.False(t, ok, "a runner still ending its job is no zombie")
	_, ok = JobOver(time.Time{}, false, created, now, 5*time.Minute)
	assert.False(t, ok, "a job that runs")
	_, ok = JobOver(ended, true, now.Add(-5*time.Minute), now, 5*time.Minute)
	assert.False(t, ok, "a job that ended before the pod was created is not its job")
}
