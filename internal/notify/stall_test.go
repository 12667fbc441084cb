package notify

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"
	"github.com/stretchr/testify/assert"
	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// runner is a live runner pod as the leader names it for a stall: no
// class, no death.
func runner(preset, pod string, job *v1alpha1.Job) death.Record {
	return death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: pod, UID: "0b6f7d4e-uid", Node: "ip-10-0-3-17", Preset: preset, Job: job}}
}

func TestPlanStall(t *testing.T) {
	off := cfg()
	off.Namespaces = nil
	noGitHub := cfg()
	noGitHub.GitHub = nil
	disclosed := cfg()
	disclosed.Disclose = config.Selection{Namespaces: []string{"ci"}}
	cases := []struct {
		name string
		r    death.Record
		cfg  config.Reports
		want []Target
	}{
		{"an ARC runner's stall goes to its workflow run's commit, not to the sinks", runner("arc-scale-set", "r", erJob), cfg(),
			[]Target{{Destination: GitHub, Repository: "acme/app", Run: "900123"}}},
		{"a GitLab build pod's, to its job's commit", runner("gitlab", "b", labJob), cfg(),
			[]Target{{Destination: GitLab, Project: "1234", Job: "42"}}},
		{"disclosed where the operator opted in", runner("gitlab", "b", labJob), disclosed,
			[]Target{{Destination: GitLab, Project: "1234", Job: "42", Disclose: true}}},
		{"nowhere where no namespace or preset opted in", runner("arc-scale-set", "r", erJob), off, nil},
		{"nowhere when the fleet's service takes no reports", runner("arc-scale-set", "r", erJob), noGitHub, nil},
		{"a pod the fleet's controller did not create is told nowhere (a death would be skipped)",
			runner("arc-scale-set", "r", &v1alpha1.Job{ID: "7311", Run: "900123", Project: "acme/app", Source: "EphemeralRunner/r", CreatedBy: "system:serviceaccount:ci:editor"}), cfg(), nil},
		{"a pod not named for the EphemeralRunner it claims is told nowhere",
			runner("arc-scale-set", "impostor", erJob), cfg(), nil},
		{"a build pod an editor created is told nowhere",
			runner("gitlab", "b", &v1alpha1.Job{ID: "42", Project: "1234", Source: runnerpod.JobFromPodMarks, CreatedBy: "system:serviceaccount:ci:editor"}), cfg(), nil},
		{"a pod whose job was not read is told nowhere", runner("gitlab", "b", nil), cfg(), nil},
		{"a fleet that reports on no commit, nowhere", runner("generic", "g", labJob), cfg(), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, PlanStall(tc.r, tc.cfg))
		})
	}
}

func TestStallRendering(t *testing.T) {
	began := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	s := func(phase string, limit int64, lasted time.Duration) Stall {
		return Stall{Record: runner("arc-scale-set", "arc-runner-x", erJob), Phase: phase, Began: began, At: began.Add(lasted), Limit: limit}
	}
	cases := []struct {
		name                  string
		s                     Stall
		title, description    string
		summaryHas, summaryNo []string
	}{
		{"under way, with its limit", s(StallUnderWay, 4<<30, 150*time.Second),
			"Runner stalled at its 4 GiB memory limit",
			"Runner stalled at its 4 GiB memory limit for 2m30s so far: raise the job's memory limit, or move the job to a bigger lane (a runner label of larger runners); or make the job use less memory (fewer parallel build or test workers).",
			[]string{"has been stalled at its memory limit of 4 GiB for 2m30s, since 2026-03-04T10:00:00Z", "What you can do: raise the job's memory limit", "is completed when the runner recovers or ends",
				"`kubectl logs -n ci arc-runner-x -c runnerguard-vitals`"}, nil},
		{"under way, no limit set", s(StallUnderWay, 0, 40*time.Second),
			"Runner stalled at its memory limit", "",
			[]string{"stalled at its memory limit for 40s"}, []string{"GiB"}},
		{"recovered", s(StallRecovered, 512<<20, 4*time.Minute),
			"Runner recovered after 4m stalled at its 512 MiB memory limit",
			"Runner recovered after 4m stalled at its 512 MiB memory limit",
			[]string{"was stalled at its memory limit of 512 MiB for 4m, from 2026-03-04T10:00:00Z, and recovered: the job went on"}, []string{"is completed when"}},
		{"ended while stalled, no death told", s(StallEnded, 4<<30, 12*time.Minute),
			"Runner ended after 12m stalled at its 4 GiB memory limit",
			"Runner ended after 12m stalled at its 4 GiB memory limit",
			[]string{"until its pod ended", "the job's own result is its outcome"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.title, StallTitle(tc.s))
			if tc.description != "" {
				assert.Equal(t, tc.description, StallDescription(tc.s))
			}
			assert.LessOrEqual(t, len([]rune(StallDescription(tc.s))), MaxDescription)
			sum := StallSummary(tc.s)
			for _, want := range tc.summaryHas {
				assert.Contains(t, sum, want)
			}
			for _, no := range tc.summaryNo {
				assert.NotContains(t, sum, no)
			}
		})
	}
}

func TestAStallsReportNamesNoNodeOrUIDAndNoUnsafeCommand(t *testing.T) {
	s := Stall{Record: runner("arc-scale-set", "r", erJob), Phase: StallUnderWay, Began: time.Now(), At: time.Now()}
	shown := StallDelivery{Stall: s, Target: Target{Destination: GitHub}}.Shown()
	for _, text := range []string{StallTitle(shown), StallSummary(shown), StallDescription(shown), StallExternalID(s.Record.UID)} {
		assert.NotContains(t, text, s.Record.UID)
		assert.NotContains(t, text, s.Record.Node)
	}
	assert.Equal(t, StallExternalID(s.Record.UID), StallExternalID(s.Record.UID), "the death's report finds it by the pod's UID")
	assert.NotEqual(t, StallExternalID(s.Record.UID), StallExternalID("another"))
	s.Record.Pod = "r`; rm -rf /"
	assert.NotContains(t, StallSummary(s), "kubectl logs", "a name the API server never allows is not shown as a command")
}

func TestStallWrite(t *testing.T) {
	for _, tc := range []struct {
		phase string
		open  bool
		want  string
	}{
		{StallUnderWay, false, StallOpen},
		{StallUnderWay, true, StallNone},
		{StallRecovered, true, StallComplete},
		{StallRecovered, false, StallNone},
		{StallEnded, true, StallComplete},
		{StallEnded, false, StallNone},
	} {
		assert.Equal(t, tc.want, StallWrite(tc.phase, tc.open), "%s, open %v", tc.phase, tc.open)
	}
}

func TestNewest(t *testing.T) {
	runs := []*github.CheckRun{
		{ID: github.Ptr(int64(3)), ExternalID: github.Ptr("stall-a")},
		{ID: github.Ptr(int64(9)), ExternalID: github.Ptr("stall-a")},
		{ID: github.Ptr(int64(12)), ExternalID: github.Ptr("uid-death")},
	}
	assert.Equal(t, int64(9), Newest(runs, "stall-a").GetID(), "a pod that stalled twice: the later run")
	assert.Equal(t, int64(12), Newest(runs, "uid-death").GetID())
	assert.Nil(t, Newest(runs, "stall-b"))
}

func TestStateOver(t *testing.T) {
	oom := death.Record{DeathRecord: v1alpha1.DeathRecord{Class: string(death.CgroupOOM)}}
	drained := death.Record{DeathRecord: v1alpha1.DeathRecord{Class: string(death.DeletedRunning), DeleteRule: string(runnerpod.RuleNodeDrain), Deleted: true}}
	for _, tc := range []struct {
		name    string
		r       death.Record
		running bool
		want    gitlab.BuildStateValue
	}{
		{"a death fails its job's status", oom, false, gitlab.Failed},
		{"and a stall's running one, in place", oom, true, gitlab.Failed},
		{"a runner ended on purpose is skipped", drained, false, gitlab.Skipped},
		{"but a running status cannot be skipped: success, which fails no pipeline either", drained, true, gitlab.Success},
	} {
		assert.Equal(t, tc.want, StateOver(tc.r, tc.running), tc.name)
	}
	assert.True(t, strings.HasPrefix(StallExternalID("x"), "stall-"))
}
