package notify

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

const (
	manager       = "system:serviceaccount:gitlab-runner:gitlab-runner"
	arcController = "system:serviceaccount:arc-systems:arc-gha-rs-controller"
)

func cfg() config.Reports {
	return config.Reports{
		Namespaces: []string{"ci"},
		GitHub:     &config.GitHub{URL: "https://api.github.com/", AppID: 1, InstallationID: 2, Secret: "gh", Controllers: []string{arcController}},
		GitLab:     &config.GitLab{URL: "https://gitlab.com", Secret: "gl", Managers: []string{manager}},
		Sinks:      []config.Sink{{Name: "alerts", URL: "https://hooks.example.com/", Secret: "s", LastWords: true}},
	}
}

func arc(class death.Class, job *v1alpha1.Job) death.Record {
	return death.Record{Namespace: "ci", DeathRecord: v1alpha1.DeathRecord{Pod: "r", Preset: "arc-scale-set", Class: string(class), Job: job}}
}

func build(ns string, job *v1alpha1.Job) death.Record {
	return death.Record{Namespace: ns, DeathRecord: v1alpha1.DeathRecord{Pod: "b", Preset: "gitlab", Class: string(death.CgroupOOM), Job: job}}
}

var (
	erJob  = &v1alpha1.Job{ID: "7311", Run: "900123", Project: "acme/app", Source: "EphemeralRunner/r", CreatedBy: arcController}
	labJob = &v1alpha1.Job{ID: "42", Project: "1234", Source: runnerpod.JobFromPodMarks, CreatedBy: manager}
)

func TestPlan(t *testing.T) {
	sink := Target{Destination: "sink/alerts", Sink: &cfg().Sinks[0], LastWords: true, Disclose: true}
	withLabJob := func(mod func(j *v1alpha1.Job)) *v1alpha1.Job { j := *labJob; mod(&j); return &j }
	off := cfg()
	off.Namespaces = nil
	cases := []struct {
		name string
		r    death.Record
		cfg  config.Reports
		want []Target
	}{
		{"an OOM-killed ARC runner goes to its repository's workflow run and the sink", arc(death.CgroupOOM, erJob), cfg(),
			[]Target{{Destination: GitHub, Repository: "acme/app", Run: "900123"}, sink}},
		{"a job's normal end is told nowhere", arc(death.JobEnded, erJob), cfg(), nil},
		{"a clean exit is told nowhere", arc(death.CleanExit, erJob), cfg(), nil},
		{"an idle runner's removal is told nowhere", arc(death.IdleRemoved, nil), cfg(), nil},
		{"nothing is told where no namespace or preset opted in", arc(death.CgroupOOM, erJob), off, nil},
		{"an ARC job read from pod marks is not told to GitHub", arc(death.ProbeKill, &v1alpha1.Job{ID: "1", Run: "2", Project: "acme/app", Source: runnerpod.JobFromPodMarks}), cfg(),
			[]Target{{Destination: GitHub, Skip: "the job was not read from the pod's EphemeralRunner (source pod)"}, sink}},
		{"a pod an editor created owned by another runner's EphemeralRunner is not told to GitHub", arc(death.CgroupOOM, &v1alpha1.Job{ID: "7311", Run: "900123", Project: "acme/app", Source: "EphemeralRunner/other"}), cfg(),
			[]Target{{Destination: GitHub, Skip: "the pod is not named for the EphemeralRunner it claims as its owner, as ARC names its runner's pod (EphemeralRunner/other)"}, sink}},
		{"a pod an editor created under the runner's name is not told to GitHub", arc(death.CgroupOOM, withJob(erJob, func(j *v1alpha1.Job) { j.CreatedBy = "system:serviceaccount:ci:reaper" })), cfg(),
			[]Target{{Destination: GitHub, Skip: "the runner pod was not created by a configured ARC controller (created by system:serviceaccount:ci:reaper)"}, sink}},
		{"nor one whose creator was not recorded", arc(death.CgroupOOM, withJob(erJob, func(j *v1alpha1.Job) { j.CreatedBy = "" })), cfg(),
			[]Target{{Destination: GitHub, Skip: "the runner pod was not created by a configured ARC controller (created by no one recorded)"}, sink}},
		{"an ARC death without a job is skipped for GitHub and still goes to the sink", arc(death.NodeLost, nil), cfg(),
			[]Target{{Destination: GitHub, Skip: "the record names no job"}, sink}},
		{"an ARC job without a workflow run is skipped", arc(death.NodeLost, &v1alpha1.Job{ID: "1", Project: "acme/app", Source: "EphemeralRunner/r"}), cfg(),
			[]Target{{Destination: GitHub, Skip: "the job names no workflow run"}, sink}},
		{"a GitLab build pod its manager created goes to its project's job", build("ci", labJob), cfg(),
			[]Target{{Destination: GitLab, Project: "1234", Job: "42"}, sink}},
		{"a GitLab build pod an editor created is not told to GitLab", build("ci", withLabJob(func(j *v1alpha1.Job) { j.CreatedBy = "mallory" })), cfg(),
			[]Target{{Destination: GitLab, Skip: "the build pod was not created by a configured GitLab Runner manager (created by mallory)"}, sink}},
		{"a GitLab build pod whose creator was not recorded is not told to GitLab", build("ci", withLabJob(func(j *v1alpha1.Job) { j.CreatedBy = "" })), cfg(),
			[]Target{{Destination: GitLab, Skip: "the build pod was not created by a configured GitLab Runner manager (created by no one recorded)"}, sink}},
		{"a manager of the build pod's own namespace is not trusted by default", build("gitlab-runner", labJob), withNamespace(cfg(), "gitlab-runner"),
			[]Target{{Destination: GitLab, Skip: "the manager " + manager + " is a ServiceAccount of the build pod's own namespace, which anyone granted edit there can act as"}, sink}},
		{"a GitLab job id that is not a number is skipped", build("ci", withLabJob(func(j *v1alpha1.Job) { j.ID = "../1" })), cfg(),
			[]Target{{Destination: GitLab, Skip: "the job's id is not a number"}, sink}},
		{"a project given by path is told", build("ci", withLabJob(func(j *v1alpha1.Job) { j.Project = "group/sub/app" })), cfg(),
			[]Target{{Destination: GitLab, Project: "group/sub/app", Job: "42"}, sink}},
		{"a preset opts in in any namespace", build("elsewhere", labJob), byPresetCfg(), []Target{{Destination: GitLab, Project: "1234", Job: "42"}, sink}},
		{"a namespace the operator named may be told names", arc(death.CgroupOOM, erJob), disclosing(cfg(), config.Selection{Namespaces: []string{"ci"}}),
			[]Target{{Destination: GitHub, Repository: "acme/app", Run: "900123", Disclose: true}, sink}},
		{"and a preset", build("ci", labJob), disclosing(cfg(), config.Selection{Presets: []runnerpod.PresetName{"gitlab"}}),
			[]Target{{Destination: GitLab, Project: "1234", Job: "42", Disclose: true}, sink}},
		{"another namespace's is not", arc(death.CgroupOOM, erJob), disclosing(cfg(), config.Selection{Namespaces: []string{"private"}, Presets: []runnerpod.PresetName{"gitlab"}}),
			[]Target{{Destination: GitHub, Repository: "acme/app", Run: "900123"}, sink}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Plan(c.r, c.cfg)
			for i := range got {
				if got[i].Sink == nil {
					continue
				}
				assert.Equal(t, c.want[i].Sink.Name, got[i].Sink.Name)
				got[i].Sink = c.want[i].Sink
			}
			assert.Equal(t, c.want, got)
		})
	}
}

func withNamespace(c config.Reports, ns string) config.Reports {
	c.Namespaces = append(c.Namespaces, ns)
	return c
}

func withJob(j *v1alpha1.Job, mod func(*v1alpha1.Job)) *v1alpha1.Job {
	c := *j
	mod(&c)
	return &c
}

func disclosing(c config.Reports, d config.Selection) config.Reports {
	c.Disclose = d
	return c
}

func byPresetCfg() config.Reports {
	c := cfg()
	c.Namespaces = nil
	c.Presets = append(c.Presets, "gitlab")
	return c
}
