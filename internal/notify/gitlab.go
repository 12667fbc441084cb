package notify

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	gitlab "gitlab.com/gitlab-org/api/client-go"

	"github.com/runnerguard/runnerguard/internal/death"
)

// GitLabSender sets an external commit status on the job's commit, in the
// job's pipeline: running while the runner stalls, then the death's. The commit and the pipeline are GitLab's answer for the
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

// statuses are the commit's statuses of the job's name.
func (s *GitLabSender) statuses(ctx context.Context, c *gitlab.Client, project, job, sha string) ([]*gitlab.CommitStatus, error) {
	opt := &gitlab.GetCommitStatusesOptions{Name: gitlab.Ptr(StatusName(job)), All: gitlab.Ptr(true)}
	sts, resp, err := c.Commits.GetCommitStatuses(project, sha, opt, gitlab.WithContext(ctx))
	if err != nil {
		return nil, failure(response(resp), fmt.Errorf("listing statuses of %s: %w", sha, err), s.Now())
	}
	return slices.DeleteFunc(sts, func(st *gitlab.CommitStatus) bool { return st.Name != StatusName(job) }), nil
}

// Running reports whether one of sts is still running (or pending): a
// stall's status GitLab would update in place.
func Running(sts []*gitlab.CommitStatus) bool {
	return slices.ContainsFunc(sts, func(st *gitlab.CommitStatus) bool {
		return st.Status == string(gitlab.Running) || st.Status == string(gitlab.Pending)
	})
}

// Find looks for the death's status on its commit: of the job's name and
// the death's description, so that the stall's status of the same name is
// not taken for it.
func (s *GitLabSender) Find(ctx context.Context, d Delivery) (string, bool, error) {
	c, err := s.client(ctx)
	if err != nil {
		return "", false, err
	}
	j, err := s.job(ctx, c, d)
	if err != nil {
		return "", false, err
	}
	sts, err := s.statuses(ctx, c, d.Target.Project, d.Target.Job, j.Commit.ID)
	if err != nil {
		return "", false, err
	}
	want := Description(d.Shown())
	if slices.ContainsFunc(sts, func(st *gitlab.CommitStatus) bool { return st.Description == want }) {
		return j.WebURL, true, nil
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

// StateOver is State when the stall's status of the same name is still
// running, which GitLab updates in place: its state machine moves a
// running status to failed or success but never to skipped, so a runner
// ended on purpose is success there, which fails no pipeline either.
func StateOver(r death.Record, running bool) gitlab.BuildStateValue {
	if st := State(r); st != gitlab.Skipped || !running {
		return st
	}
	return gitlab.Success
}

// Send sets the status: its State, the death's title, the job's page. A
// stall's running status of the job is replaced by it.
func (s *GitLabSender) Send(ctx context.Context, d Delivery) (string, error) {
	c, err := s.client(ctx)
	if err != nil {
		return "", err
	}
	j, err := s.job(ctx, c, d)
	if err != nil {
		return "", err
	}
	state := State(d.Record)
	if state == gitlab.Skipped {
		sts, err := s.statuses(ctx, c, d.Target.Project, d.Target.Job, j.Commit.ID)
		if err != nil {
			return "", err
		}
		state = StateOver(d.Record, Running(sts))
	}
	return s.set(ctx, c, d, j, state, Description(d.Shown()))
}

// set sets the job's status on its commit, in its pipeline.
func (s *GitLabSender) set(ctx context.Context, c *gitlab.Client, d Delivery, j *gitlab.Job, state gitlab.BuildStateValue, description string) (string, error) {
	opt := &gitlab.SetCommitStatusOptions{
		State: state, Name: gitlab.Ptr(StatusName(d.Target.Job)), Ref: gitlab.Ptr(j.Ref),
		TargetURL: gitlab.Ptr(j.WebURL), Description: gitlab.Ptr(description),
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

// TellStall sets the job's status running while the runner stalls, and
// success once the stall ended: the same name as the death's status, so
// that a death's report later replaces it. A running external status
// keeps the pipeline running, so one is never left so.
func (s *GitLabSender) TellStall(ctx context.Context, sd StallDelivery) (string, error) {
	d := Delivery{Record: sd.Stall.Record, Target: sd.Target}
	c, err := s.client(ctx)
	if err != nil {
		return "", err
	}
	j, err := s.job(ctx, c, d)
	if err != nil {
		return "", err
	}
	sts, err := s.statuses(ctx, c, d.Target.Project, d.Target.Job, j.Commit.ID)
	if err != nil {
		return "", err
	}
	switch StallWrite(sd.Stall.Phase, Running(sts)) {
	case StallOpen:
		return s.set(ctx, c, d, j, gitlab.Running, StallDescription(sd.Shown()))
	case StallComplete:
		return s.set(ctx, c, d, j, gitlab.Success, StallDescription(sd.Shown()))
	}
	return j.WebURL, nil
}

func response(r *gitlab.Response) *http.Response {
	if r == nil {
		return nil
	}
	return r.Response
}
