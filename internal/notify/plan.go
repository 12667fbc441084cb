package notify

import (
	"cmp"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// Destination names on a record's status.
const (
	GitHub    = "github"
	GitLab    = "gitlab"
	Buildkite = "buildkite"
	// Forge stands for a Woodpecker step's forge that is neither GitHub
	// nor GitLab: its report is Skipped, saying why.
	Forge      = "forge"
	sinkPrefix = "sink/"
)

// Target is one report a death is owed: where it goes and with what, or
// why it cannot go there (Skip).
type Target struct {
	Destination string
	// Skip says why the record cannot be told here; the report is kept as
	// Skipped with it.
	Skip string
	// Repository ("owner/name") and Run (the workflow run) for GitHub;
	// Project and Job for GitLab: read only from what the fleet alone
	// writes.
	Repository, Run, Project, Job string
	// Commit is the commit itself, for a fleet that names it (Woodpecker),
	// and RepositoryID the forge's id of its repository, which the sender
	// holds Repository to (GitHub) or writes to (GitLab's Project).
	Commit, RepositoryID string
	// Organization, Pipeline and Build name a Buildkite build (Job: the
	// job's UUID, the annotation's context).
	Organization, Pipeline, Build string
	Sink                          *config.Sink
	LastWords                     bool
	// Disclose: the report may name principals, nodes and UIDs (the
	// operator's own sinks always may; GitHub and GitLab where the
	// operator opted in), else they are withheld (Public).
	Disclose bool
}

// OptedIn reports whether the record's namespace or preset opted in.
func OptedIn(r death.Record, cfg config.Reports) bool {
	return config.Selection{Namespaces: cfg.Namespaces, Presets: cfg.Presets}.Has(r.Namespace, runnerpod.PresetName(r.Preset))
}

// Plan is every report the record is owed under cfg, in a stable order.
func Plan(r death.Record, cfg config.Reports) []Target {
	if !cfg.Enabled() || !death.Class(r.Class).Told() || !OptedIn(r, cfg) {
		return nil
	}
	ts := serviceTargets(r, cfg)
	for i := range cfg.Sinks {
		s := &cfg.Sinks[i]
		ts = append(ts, Target{Destination: sinkPrefix + s.Name, Sink: s, LastWords: s.LastWords, Disclose: true})
	}
	return ts
}

// serviceTargets is the report on the job's commit the fleet's service
// takes (GitHub's check run, GitLab's commit status), if any: a death's
// and a stall's alike, under the same trust rules.
func serviceTargets(r death.Record, cfg config.Reports) []Target {
	f, ok := presets.For(runnerpod.PresetName(r.Preset))
	if !ok {
		return nil
	}
	var ts []Target
	switch t := f.Traits(); {
	case t.ToldOn == fleet.GitHubCheckRun && cfg.GitHub != nil:
		ts = append(ts, githubTarget(r, cfg.GitHub, t.RecordKind))
	case t.ToldOn == fleet.GitLabCommitStatus && cfg.GitLab != nil:
		ts = append(ts, gitlabTarget(r, cfg.GitLab))
	case t.ToldOn == fleet.BuildkiteAnnotation && cfg.Buildkite != nil:
		ts = append(ts, buildkiteTarget(r, cfg.Buildkite))
	case t.ToldOn == fleet.ForgeCommit && cfg.Woodpecker != nil:
		ts = append(ts, forgeTarget(r, cfg))
	}
	for i := range ts {
		ts[i].Disclose = cfg.Disclose.Has(r.Namespace, runnerpod.PresetName(r.Preset))
	}
	return ts
}

var (
	repository = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$`)
	number     = regexp.MustCompile(`^[1-9][0-9]{0,19}$`)
)

// githubTarget: the job as the fleet's record (ARC's EphemeralRunner, of
// kind record) stated it, matched to the pod by UID when the record was
// written; its status is written only by ARC's controllers. ARC names a
// runner's pod for its EphemeralRunner: a pod of another name that claims
// the EphemeralRunner as its owner (anyone who may create pods can write
// any ownerReferences at CREATE) is not its runner, and its death is not
// the job's. Nor is a pod an editor created under that name while the
// runner had none (between ARC's removal of a pod and its next): only a
// pod one of the configured ARC controllers created (its recorded creator)
// is. The commit is the workflow run's head, asked of GitHub.
func githubTarget(r death.Record, g *config.GitHub, record string) Target {
	t := Target{Destination: GitHub, LastWords: g.LastWords}
	j := r.Job
	switch {
	case j == nil:
		t.Skip = "the record names no job"
	case record == "" || !strings.HasPrefix(j.Source, fleet.RecordSource(record, "")):
		t.Skip = "the job was not read from the pod's " + cmp.Or(record, "fleet's record") + " (source " + j.Source + ")"
	case j.Source != fleet.RecordSource(record, r.Pod):
		t.Skip = "the pod is not named for the " + record + " it claims as its owner, as ARC names its runner's pod (" + j.Source + ")"
	case !repository.MatchString(j.Project):
		t.Skip = "the job's repository is not owner/name"
	case !number.MatchString(j.Run):
		t.Skip = "the job names no workflow run"
	case !slices.Contains(g.Controllers, j.CreatedBy):
		t.Skip = "the runner pod was not created by a configured ARC controller (created by " + quoteOrNone(j.CreatedBy) + ")"
	default:
		t.Repository, t.Run = j.Project, j.Run
	}
	return t
}

// gitlabTarget: the job as the build pod's marks state it, trusted only when a
// configured manager created the pod (the injector's record of its
// creator, which the policy keeps; the policy also keeps the job's marks
// as written at CREATE). The commit is the job's, asked of GitLab.
func gitlabTarget(r death.Record, g *config.GitLab) Target {
	t := Target{Destination: GitLab}
	j := r.Job
	maker := markMaker{"build pod", "GitLab Runner manager", "manager", g.Managers, g.ManagerInRunnerNamespace}
	switch {
	case j == nil:
		t.Skip = "the record names no job"
	case untrusted(r, maker) != "":
		t.Skip = untrusted(r, maker)
	case !number.MatchString(j.Project) && !projectPath.MatchString(j.Project):
		t.Skip = "the job's project is neither an id nor a path"
	case !number.MatchString(j.ID):
		t.Skip = "the job's id is not a number"
	default:
		t.Project, t.Job = j.Project, j.ID
	}
	return t
}

// markMaker is who must have made a pod whose marks name its job: one of
// creators (the pod's recorded creator), and no ServiceAccount of the
// pod's own namespace, which anyone granted edit there can act as, unless
// the operator says the maker runs there.
type markMaker struct {
	pod, creator, role string
	creators           []string
	inRunnerNamespace  bool
}

// untrusted says why r's job, read from its pod's marks, is not the
// word of m, "" when it is.
func untrusted(r death.Record, m markMaker) string {
	j := r.Job
	switch {
	case j.Source != runnerpod.JobFromPodMarks:
		return "the job was not read from the " + m.pod + "'s marks"
	case !slices.Contains(m.creators, j.CreatedBy):
		return "the " + m.pod + " was not created by a configured " + m.creator + " (created by " + quoteOrNone(j.CreatedBy) + ")"
	case !m.inRunnerNamespace && inNamespace(j.CreatedBy, r.Namespace):
		return "the " + m.role + " " + j.CreatedBy + " is a ServiceAccount of the " + m.pod + "'s own namespace, which anyone granted edit there can act as"
	}
	return ""
}

var projectPath = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+$`)

func inNamespace(user, ns string) bool {
	sans, _, err := serviceaccount.SplitUsername(user)
	return err == nil && sans == ns
}

func quoteOrNone(s string) string {
	if s == "" {
		return "no one recorded"
	}
	return s
}
