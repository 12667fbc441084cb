package notify

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/runnerguard/runnerguard/internal/death"
)

// GitLabSender sets an external commit status on the job's commit, in the
// job's pipeline. The commit and the pipeline are GitLab's answer for the
// project's job, never the pod's word.
type GitLabSender struct {
	BaseURL string
	// Token is read from the Secret at each report, so a rotated token
	// needs no restart.
	Token      func(ctx context.Context) (string, error)
	HTTPClient *http.Client
	Now        func() time.Time
}

func (s *GitLabSender) client(ctx context.Context) (*gitlab.Client, error) {
	token, err := s.Token(ctx)
	if err != nil {
		return nil, err
	}
	// The reporter's own attempts, counted on the record, are the only
	// retries.
	opts := []gitlab.ClientOptionFunc{gitlab.WithBaseURL(s.BaseURL), gitlab.WithoutRetries()}
	if s.HTTPClient != nil {
		opts = append(opts, gitlab.WithHTTPClient(s.HTTPClient))
	}
	return gitlab.NewClient(token, opts...)
}

// StatusName is the commit status's name: the job's, so that a status of
// one job's death is told apart from another's on the same commit.
func StatusName(job string) string { return CheckName + ": job " + job }

func (s *GitLabSender) job(ctx context.Context, c *gitlab.Client, d Delivery) (*gitlab.Job, error) {
	id, err := strconv.ParseInt(d.Target.Job, 10, 64)
	if err != nil {
		return nil, &Failure{Err: fmt.Errorf("job id %q: %w", d.Target.Job, err)}
	}
	j, resp, err := c.Jobs.GetJob(d.Target.Project, id, gitlab.WithContext(ctx))
	if err != nil {
		return nil, failure(response(resp), fmt.Errorf("reading job %s of project %s: %w", d.Target.Job, d.Target.Project, err), s.Now())
	}
	if j.Commit == nil || j.Commit.ID == "" {
		return nil, &Failure{Err: fmt.Errorf("job %s of project %s names no commit", d.Target.Job, d.Target.Project)}
	}
	return j, nil
}

// Find looks for the job's status on its commit.
func (s *GitLabSender) Find(ctx context.Context, d Delivery) (string, bool, error) {
	c, err := s.client(ctx)
	if err != nil {
		return "", false, err
	}
	j, err := s.job(ctx, c, d)
	if err != nil {
		return "", false, err
	}
	opt := &gitlab.GetCommitStatusesOptions{Name: gitlab.Ptr(StatusName(d.Target.Job)), All: gitlab.Ptr(true)}
	sts, resp, err := c.Commits.GetCommitStatuses(d.Target.Project, j.Commit.ID, opt, gitlab.WithContext(ctx))
	if err != nil {
		return "", false, failure(response(resp), fmt.Errorf("listing statuses of %s: %w", j.Commit.ID, err), s.Now())
	}
	for _, st := range sts {
		if st.Name == StatusName(d.Target.Job) {
			return j.WebURL, true, nil
		}
	}
	return "", false, nil
}

// State is the commit status's: skipped for a runner ended on purpose,
// failed for any other death. GitLab puts the status in the job's
// pipeline and sets no allow_failure on it (gitlab-org/gitlab#22536): a
// failed one keeps the pipeline failed after the job's retry passes; a
// skipped one leaves the pipeline's result to its jobs.
func State(r death.Record) gitlab.BuildStateValue {
	if r.Deliberate() {
		return gitlab.Skipped
	}
	return gitlab.Failed
}

// Send sets the status: its State, the death's title, the job's page.
func (s *GitLabSender) Send(ctx context.Context, d Delivery) (string, error) {
	c, err := s.client(ctx)
	if err != nil {
		return "", err
	}
	j, err := s.job(ctx, c, d)
	if err != nil {
		return "", err
	}
	opt := &gitlab.SetCommitStatusOptions{
		State: State(d.Record), Name: gitlab.Ptr(StatusName(d.Target.Job)), Ref: gitlab.Ptr(j.Ref),
		TargetURL: gitlab.Ptr(j.WebURL), Description: gitlab.Ptr(Description(d.Shown())),
	}
	if j.Pipeline.ID != 0 {
		opt.PipelineID = gitlab.Ptr(j.Pipeline.ID)
	}
	_, resp, err := c.Commits.SetCommitStatus(d.Target.Project, j.Commit.ID, opt, gitlab.WithContext(ctx))
	if err != nil {
		return "", failure(response(resp), fmt.Errorf("setting the status of %s: %w", j.Commit.ID, err), s.Now())
	}
	return j.WebURL, nil
}

func response(r *gitlab.Response) *http.Response {
	if r == nil {
		return nil
	}
	return r.Response
}
