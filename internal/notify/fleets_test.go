package notify

import (
	"strings"
	"testing"
	"time"

	"github.com/buildkite/go-buildkite/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const (
	jobController = "system:serviceaccount:kube-system:job-controller"
	wpAgent       = "system:serviceaccount:woodpecker:woodpecker-agent"
	bkUUID        = "0190a3c4-1b2c-4d5e-8f90-a1b2c3d4e5f6"
	sha           = "9fceb02d0ae598e95dc970b74767f19372d61af8"
)

func fleetsCfg() config.Reports {
	c := cfg()
	c.Buildkite = &config.Buildkite{URL: "https://api.buildkite.com/", Secret: "bk", Creators: []string{jobController}}
	c.Woodpecker = &config.Woodpecker{Agents: []string{wpAgent}}
	return c
}

func bkDeath(job *v1alpha1.Job) death.Record {
	return death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "buildkite-" + bkUUID + "-x4k2p", Preset: "buildkite", Class: string(death.CgroupOOM), Job: job}}
}

func wpDeath(ns string, job *v1alpha1.Job) death.Record {
	return death.Record{Namespace: ns, DeathRecord: v1alpha1.DeathRecord{Pod: "wp-01j9x2k7m3", Preset: "woodpecker", Class: string(death.NodeEviction), Job: job}}
}

var (
	bkJob = &v1alpha1.Job{ID: bkUUID, URL: "https://buildkite.com/acme/app/builds/42#" + bkUUID, Project: "app", Name: "test", Source: runnerpod.JobFromPodMarks, CreatedBy: jobController}
	wpJob = &v1alpha1.Job{ID: "1342", Name: "test", Project: "acme/app", Commit: sha, Forge: "github", RepositoryID: "123456",
		Source: runnerpod.JobFromPodMarks, CreatedBy: wpAgent}
)

func TestPlanOfBuildkiteAndWoodpecker(t *testing.T) {
	sink := Target{Destination: "sink/alerts", Sink: &cfg().Sinks[0], LastWords: true, Disclose: true}
	noGitLab := fleetsCfg()
	noGitLab.GitLab = nil
	inNS := fleetsCfg()
	inNS.Woodpecker.AgentInRunnerNamespace = true
	withoutBuildkite := cfg()
	cases := []struct {
		name string
		r    death.Record
		cfg  config.Reports
		want Target
	}{
		{"a Buildkite job pod the job controller made goes to its build, in its job's context", bkDeath(bkJob), fleetsCfg(),
			Target{Destination: Buildkite, Organization: "acme", Pipeline: "app", Build: "42", Job: bkUUID}},
		{"a Buildkite job pod someone else made is not told", bkDeath(withJob(bkJob, func(j *v1alpha1.Job) { j.CreatedBy = "system:serviceaccount:ci:reaper" })), fleetsCfg(),
			Target{Destination: Buildkite, Skip: "the job pod was not created by a configured creator of the stack's pods (created by system:serviceaccount:ci:reaper)"}},
		{"nor one whose creator was not recorded", bkDeath(withJob(bkJob, func(j *v1alpha1.Job) { j.CreatedBy = "" })), fleetsCfg(),
			Target{Destination: Buildkite, Skip: "the job pod was not created by a configured creator of the stack's pods (created by no one recorded)"}},
		{"a job URL naming another job than the pod's label is not told", bkDeath(withJob(bkJob, func(j *v1alpha1.Job) {
			j.URL = "https://buildkite.com/acme/app/builds/42#0190a3c4-1b2c-4d5e-8f90-000000000000"
		})), fleetsCfg(), Target{Destination: Buildkite, Skip: "the job's URL names job 0190a3c4-1b2c-4d5e-8f90-000000000000, not the pod's " + bkUUID}},
		{"a job URL that names no build is not told", bkDeath(withJob(bkJob, func(j *v1alpha1.Job) { j.URL = "https://buildkite.com/acme/app#" + bkUUID })), fleetsCfg(),
			Target{Destination: Buildkite, Skip: "the job's URL does not name an organization's pipeline's build"}},
		{"a Buildkite death with no job is skipped", bkDeath(nil), fleetsCfg(), Target{Destination: Buildkite, Skip: "the record names no job"}},
		{"Buildkite off: no report but the sink's", bkDeath(bkJob), withoutBuildkite, Target{}},

		{"a Woodpecker step on GitHub goes to its commit, held to its repository's id", wpDeath("ci", wpJob), fleetsCfg(),
			Target{Destination: GitHub, Repository: "acme/app", RepositoryID: "123456", Commit: sha}},
		{"a Woodpecker step on GitLab goes to its project, by id", wpDeath("ci", withJob(wpJob, func(j *v1alpha1.Job) { j.Forge = "gitlab" })), fleetsCfg(),
			Target{Destination: GitLab, Project: "123456", RepositoryID: "123456", Commit: sha}},
		{"a step on a forge neither GitHub nor GitLab says why it is not told", wpDeath("ci", withJob(wpJob, func(j *v1alpha1.Job) { j.Forge = "forgejo" })), fleetsCfg(),
			Target{Destination: Forge, Skip: "the step's forge is forgejo: runnerguard tells a commit on GitHub or GitLab only"}},
		{"a step on GitLab with GitLab's reports off says so", wpDeath("ci", withJob(wpJob, func(j *v1alpha1.Job) { j.Forge = "gitlab" })), noGitLab,
			Target{Destination: GitLab, Skip: "the step's forge is gitlab, whose reports (reports.gitlab) are off"}},
		{"a step pod someone else created is not told", wpDeath("ci", withJob(wpJob, func(j *v1alpha1.Job) { j.CreatedBy = "mallory" })), fleetsCfg(),
			Target{Destination: GitHub, Skip: "the step pod was not created by a configured Woodpecker agent (created by mallory)"}},
		{"an agent of the step pods' own namespace is not trusted by default", wpDeath("woodpecker", wpJob), withNamespace(fleetsCfg(), "woodpecker"),
			Target{Destination: GitHub, Skip: "the agent " + wpAgent + " is a ServiceAccount of the step pod's own namespace, which anyone granted edit there can act as"}},
		{"but is with the opt-in", wpDeath("woodpecker", wpJob), withNamespace(inNS, "woodpecker"),
			Target{Destination: GitHub, Repository: "acme/app", RepositoryID: "123456", Commit: sha}},
		{"a step that names no commit is not told", wpDeath("ci", withJob(wpJob, func(j *v1alpha1.Job) { j.Commit = "main" })), fleetsCfg(),
			Target{Destination: GitHub, Skip: "the step names no commit (CI_COMMIT_SHA)"}},
		{"nor one whose repository has no forge id", wpDeath("ci", withJob(wpJob, func(j *v1alpha1.Job) { j.RepositoryID = "" })), fleetsCfg(),
			Target{Destination: GitHub, Skip: "the step's repository has no forge id (the Woodpecker server's label repo-forge-id)"}},
		{"the names are told where the operator opted in", wpDeath("ci", wpJob), disclosing(fleetsCfg(), config.Selection{Presets: []runnerpod.PresetName{"woodpecker"}}),
			Target{Destination: GitHub, Repository: "acme/app", RepositoryID: "123456", Commit: sha, Disclose: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Plan(c.r, c.cfg)
			want := []Target{c.want, sink}
			if c.want == (Target{}) {
				want = []Target{sink}
			}
			require.Len(t, got, len(want))
			got[len(got)-1].Sink = sink.Sink
			assert.Equal(t, want, got)
			// A stall goes where the death would, and nowhere it is skipped.
			st := PlanStall(c.r, c.cfg)
			if c.want.Skip != "" || c.want == (Target{}) {
				assert.Empty(t, st)
			} else {
				assert.Equal(t, []Target{c.want}, st)
			}
		})
	}
}

func TestBuildkiteJobURL(t *testing.T) {
	org, pipeline, build, job, err := BuildkiteJobURL("https://buildkite.com/acme/app/builds/42#" + bkUUID)
	require.NoError(t, err)
	assert.Equal(t, []string{"acme", "app", "42", bkUUID}, []string{org, pipeline, build, job})
	for raw, why := range map[string]string{
		"http://buildkite.com/acme/app/builds/42#" + bkUUID:     "not a Buildkite build's https URL",
		"https://buildkite.com/acme/app/builds/x#" + bkUUID:     "names no build number",
		"https://buildkite.com/acme/app/builds/42":              "names no job UUID",
		"https://buildkite.com/acme/../builds/42#" + bkUUID:     "does not name",
		"https://buildkite.com/acme/a%2Fb/builds/42#" + bkUUID:  "does not name",
		"https://buildkite.com/acme/app/builds/42/x#" + bkUUID:  "does not name",
		"https://buildkite.com/acme/app/builds/042#" + bkUUID:   "names no build number",
		"https://buildkite.com/acme/app/builds/42#" + "../../x": "names no job UUID",
	} {
		_, _, _, _, err := BuildkiteJobURL(raw)
		if assert.Error(t, err, raw) {
			assert.Contains(t, err.Error(), why, raw)
		}
	}
}

// Buildkite's word on who ran the job is what ties the pod to it: the job
// of the pod's UUID ran on an agent whose host is the pod (a pod's host
// name is its name, cut to a DNS label).
func TestBuildkiteJobRanOnThePod(t *testing.T) {
	pod := "buildkite-" + bkUUID + "-x4k2p"
	long := strings.Repeat("a", 61) + "-.bcdef"
	b := func(host string) buildkite.Build {
		return buildkite.Build{Number: 42, Jobs: []buildkite.Job{{ID: "other"}, {ID: bkUUID, Agent: buildkite.Agent{Hostname: host}}}}
	}
	assert.NoError(t, BuildkiteJobRan(b(pod), bkUUID, pod))
	assert.NoError(t, BuildkiteJobRan(b(strings.Repeat("a", 61)), bkUUID, long), "the kubelet's cut")
	for name, c := range map[string]struct {
		b    buildkite.Build
		pod  string
		want string
	}{
		"another pod ran it":        {b(pod), "buildkite-" + bkUUID + "-zzzzz", `ran on agent host "` + pod + `", not on this pod`},
		"no agent ran it":           {b(""), pod, "Buildkite names no agent host for job"},
		"the build has no such job": {buildkite.Build{Number: 42}, pod, "build 42 has no job " + bkUUID},
	} {
		err := BuildkiteJobRan(c.b, bkUUID, c.pod)
		var not *NotTold
		if assert.ErrorAs(t, err, &not, name) {
			assert.Contains(t, not.Reason, c.want, name)
		}
	}
}

// The annotation says what the check run says, on a page as public as
// its pipeline: no principal, node or id unless the operator opted in;
// style error for a death, info for a runner ended on purpose; its
// context the job's, so a second attempt replaces the first.
func TestTheAnnotationIsTheReportAsItsBuildsPageMayShowIt(t *testing.T) {
	for _, c := range death.Classes() {
		for _, rule := range []runnerpod.Rule{runnerpod.RuleBusy, runnerpod.RuleOverride, runnerpod.RuleNodeDrain} {
			r := leaky(c, rule)
			d := Delivery{Record: r, Target: Target{Destination: Buildkite, Job: bkUUID}}
			body := AnnotationBody(d.Shown(), false)
			for what, s := range secrets {
				assert.NotContains(t, body, s, "%s/%s: the %s", c, rule, what)
			}
			assert.Contains(t, body, "7311", "the job")
			want := "error"
			if r.Deliberate() {
				want = "info"
			}
			assert.Equal(t, want, AnnotationStyle(r), "%s/%s", c, rule)
			d.Target.Disclose = true
			assert.Contains(t, AnnotationBody(d.Shown(), false), secrets["deleter"], "opted in, the deleter is told")
		}
	}
	assert.Equal(t, "runnerguard-"+bkUUID, AnnotationContext(bkUUID))
	assert.Equal(t, `a\_b \[x\]\(y\) &lt;img&gt; \#1`, markdownText("a_b [x](y) <img> #1"), "a name shows as itself, never as a link or HTML")
}

// A sender's finding that the record must not go where planned is no
// failure to retry: the report is Skipped, saying why.
func TestASendersRefusalIsSkippedNotRetried(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	o := Outcome(Claim(nil, Buildkite, at), "", &NotTold{Reason: "build 42 has no job x"}, 6, at)
	assert.Equal(t, PhaseSkipped, o.Phase)
	assert.Equal(t, "build 42 has no job x", o.Message)
	assert.Nil(t, o.NextAttemptAt)
}
