package notify

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v75/github"
	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/death"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// JobAsker asks a CI service whether a runner's job has ended: evidence
// of a zombie that the fleet's own objects never give (ARC's
// EphemeralRunner keeps its job after the job completed,
// actions-runner-controller issue 4603; a GitLab build pod its manager
// lost).
type JobAsker interface {
	// JobEnded is when the job t names ended, as the service dates it;
	// false while it runs or waits, or when the service names no end.
	// runner is the runner's name at the service (GitHub's runner_name).
	JobEnded(ctx context.Context, t Target, runner string) (time.Time, bool, error)
}

// PlanJobAsk is where a live runner's job can be asked about: the
// service the record's death would be told on, under the same opt-in and
// the same trust in who created the pod (a job its creator was not trusted
// to name is never asked after: an answer about another's job must not
// free this runner).
func PlanJobAsk(r death.Record, cfg config.Reports) (Target, bool) {
	for _, t := range PlanStall(r, cfg) {
		if (t.Destination == GitHub && t.Run != "") || (t.Destination == GitLab && t.Job != "") {
			return t, true
		}
	}
	return Target{}, false
}

// JobEnded is the run's job that went to runner, completed: GitHub's
// "List jobs for a workflow run" over every attempt (a runner takes one
// job, and a re-run's jobs go to other runners), a page at a time.
func (s *GitHubSender) JobEnded(ctx context.Context, t Target, runner string) (time.Time, bool, error) {
	run, err := strconv.ParseInt(t.Run, 10, 64)
	if err != nil {
		return time.Time{}, false, &Failure{Err: fmt.Errorf("workflow run %q: %w", t.Run, err)}
	}
	c, err := s.client(ctx, t.Repository)
	if err != nil {
		return time.Time{}, false, err
	}
	owner, repo, _ := strings.Cut(t.Repository, "/")
	opts := &github.ListWorkflowJobsOptions{Filter: "all", ListOptions: github.ListOptions{PerPage: 100}}
	// A run's jobs, a few pages at most: a workflow's matrix holds 256
	// jobs, and a run more than a few workflows' worth of runners is not
	// looked through.
	for range maxJobPages {
		jobs, resp, err := c.Actions.ListWorkflowJobs(ctx, owner, repo, run, opts)
		if err != nil {
			return time.Time{}, false, githubFailure(resp, fmt.Errorf("listing the jobs of run %d in %s: %w", run, t.Repository, err), s.Now())
		}
		for _, j := range jobs.Jobs {
			if j.GetRunnerName() == runner {
				if j.GetStatus() == "completed" && j.CompletedAt != nil {
					return j.CompletedAt.Time, true, nil
				}
				return time.Time{}, false, nil
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return time.Time{}, false, nil
}

// maxJobPages bounds the pages of a run's jobs read for one runner.
const maxJobPages = 10

// JobEnded is the project's job, finished: GitLab's "Get a single job".
func (s *GitLabSender) JobEnded(ctx context.Context, t Target, _ string) (time.Time, bool, error) {
	id, err := strconv.ParseInt(t.Job, 10, 64)
	if err != nil {
		return time.Time{}, false, &Failure{Err: fmt.Errorf("job id %q: %w", t.Job, err)}
	}
	c, err := s.client(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	j, resp, err := c.Jobs.GetJob(t.Project, id, gitlab.WithContext(ctx))
	if err != nil {
		return time.Time{}, false, failure(response(resp), fmt.Errorf("reading job %s of project %s: %w", t.Job, t.Project, err), s.Now())
	}
	switch gitlab.BuildStateValue(j.Status) {
	case gitlab.Success, gitlab.Failed, gitlab.Canceled, gitlab.Skipped:
		if j.FinishedAt != nil {
			return *j.FinishedAt, true, nil
		}
	}
	return time.Time{}, false, nil
}

// JobOver is the zombie a runner is when its service says its job ended
// at ended, at least grace before now, while its runner container still
// runs: a runner ends within moments of its job (an ephemeral one exits,
// a GitLab build pod is deleted by its manager), so one still running
// after grace never will of itself. grace keeps a runner that is ending
// from being named one. A job that ended before the pod was created is not
// the pod's (a pod's job mark pointed at an old job of its project, which
// GitLab Runner lets a job's variables do), and says nothing.
func JobOver(ended time.Time, ok bool, created, now time.Time, grace time.Duration) (runnerpod.Zombie, bool) {
	if !ok || now.Sub(ended) < grace || !ended.After(created) {
		return runnerpod.Zombie{}, false
	}
	return runnerpod.Zombie{Kind: runnerpod.JobOverZombie, Since: ended}, true
}
