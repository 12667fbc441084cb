package notify

import (
	"cmp"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/runnerguard/runnerguard/api/v1alpha1"
	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The reports of the fleets told on a service of their own job's (a
// Buildkite build's annotation, a Woodpecker step's commit on its forge):
// where each goes, read only from what the fleet alone writes.

// buildkiteTarget: the build as the job's URL names it, the job by the
// pod's job-uuid label, both written by agent-stack-k8s on the Job and so
// on its pod, and kept as created by the policy; trusted only from a pod
// a configured creator (the job controller) made. Who made the Job is not
// recorded, so the sender also asks Buildkite which agent ran the job
// (BuildkiteJobRan).
func buildkiteTarget(r death.Record, b *config.Buildkite) Target {
	t := Target{Destination: Buildkite}
	j := r.Job
	org, pipeline, build, job, err := BuildkiteJobURL(jobURL(j))
	switch {
	case j == nil:
		t.Skip = "the record names no job"
	case j.Source != runnerpod.JobFromPodMarks:
		t.Skip = "the job was not read from the job pod's marks"
	case !slices.Contains(b.Creators, j.CreatedBy):
		t.Skip = "the job pod was not created by a configured creator of the stack's pods (created by " + quoteOrNone(j.CreatedBy) + ")"
	case err != nil:
		t.Skip = err.Error()
	case job != j.ID:
		t.Skip = "the job's URL names job " + line(job) + ", not the pod's " + line(j.ID)
	default:
		t.Organization, t.Pipeline, t.Build, t.Job = org, pipeline, build, job
	}
	return t
}

func jobURL(j *v1alpha1.Job) string {
	if j == nil {
		return ""
	}
	return j.URL
}

var (
	slug    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,99}$`)
	jobUUID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// BuildkiteJobURL reads a Buildkite job's URL as agent-stack-k8s writes
// it (the build's web URL with the job's UUID as its fragment:
// https://buildkite.com/ORG/PIPELINE/builds/NUMBER#UUID) into the parts
// the REST API addresses a build by.
func BuildkiteJobURL(raw string) (org, pipeline, build, job string, err error) {
	u, perr := url.Parse(raw)
	if perr != nil || u.Scheme != "https" || u.Host == "" {
		return "", "", "", "", errors.New("the job's URL is not a Buildkite build's https URL")
	}
	parts := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	switch {
	case len(parts) != 4 || parts[2] != "builds" || !slug.MatchString(parts[0]) || !slug.MatchString(parts[1]):
		return "", "", "", "", errors.New("the job's URL does not name an organization's pipeline's build")
	case !number.MatchString(parts[3]):
		return "", "", "", "", errors.New("the job's URL names no build number")
	case !jobUUID.MatchString(u.Fragment):
		return "", "", "", "", errors.New("the job's URL names no job UUID")
	}
	return parts[0], parts[1], parts[3], u.Fragment, nil
}

// forgeTarget: a Woodpecker step's commit on its forge, trusted only from
// a pod a configured agent created. The forge and the repository's id are
// labels the Woodpecker server stamps on the workflow (a pipeline's own
// labels under woodpecker-ci.org/ are dropped); the commit and the
// repository's name are the step's environment, which its pipeline can
// set, so they are held to that repository: GitHub's repository must have
// that id, GitLab's project is that id.
func forgeTarget(r death.Record, cfg config.Reports) Target {
	w := cfg.Woodpecker
	j := r.Job
	t := Target{Destination: Forge}
	if j != nil {
		switch j.Forge {
		case "github":
			t.Destination = GitHub
		case "gitlab":
			t.Destination = GitLab
		}
	}
	maker := markMaker{"step pod", "Woodpecker agent", "agent", w.Agents, w.AgentInRunnerNamespace}
	switch {
	case j == nil:
		t.Skip = "the record names no job"
	case untrusted(r, maker) != "":
		t.Skip = untrusted(r, maker)
	case t.Destination == Forge:
		t.Skip = "the step's forge is " + cmp.Or(line(j.Forge), "not named") + ": runnerguard tells a commit on GitHub or GitLab only"
	case t.Destination == GitHub && cfg.GitHub == nil, t.Destination == GitLab && cfg.GitLab == nil:
		t.Skip = "the step's forge is " + j.Forge + ", whose reports (reports." + j.Forge + ") are off"
	case !commitSHA.MatchString(j.Commit):
		t.Skip = "the step names no commit (CI_COMMIT_SHA)"
	case !number.MatchString(j.RepositoryID):
		t.Skip = "the step's repository has no forge id (the Woodpecker server's label repo-forge-id)"
	case t.Destination == GitHub && !repository.MatchString(j.Project):
		t.Skip = "the step's repository (CI_REPO) is not owner/name"
	case t.Destination == GitHub:
		t.Repository, t.RepositoryID, t.Commit = j.Project, j.RepositoryID, j.Commit
	default:
		t.Project, t.RepositoryID, t.Commit = j.RepositoryID, j.RepositoryID, j.Commit
	}
	return t
}

var commitSHA = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
