package notify

import (
	"cmp"
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

// commit is where a status goes: the commit, its ref, its pipeline and
// the page the status links to.
type commit struct {
	sha, ref, page string
	pipeline       int64
}

// where is the status's commit: GitLab's answer for the project's job, or
// the target's own commit (Woodpecker's), in the project of the target's
// id, with no pipeline of its own.
func (s *GitLabSender) where(ctx context.Context, c *gitlab.Client, d Delivery) (commit, error) {
	if d.Target.Commit != "" {
		return commit{sha: d.Target.Commit}, nil
	}
	id, err := strconv.ParseInt(d.Target.Job, 10, 64)
	if err != nil {
		return commit{}, &Failure{Err: fmt.Errorf("job id %q: %w", d.Target.Job, err)}
	}
	j, resp, err := c.Jobs.GetJob(d.Target.Project, id, gitlab.WithContext(ctx))
	if err != nil {
		return commit{}, failure(response(resp), fmt.Errorf("reading job %s of project %s: %w", d.Target.Job, d.Target.Project, err), s.Now())
	}
	if j.Commit == nil || j.Commit.ID == "" {
		return commit{}, &Failure{Err: fmt.Errorf("job %s of project %s names no commit", d.Target.Job, d.Target.Project)}
	}
	return commit{sha: j.Commit.ID, ref: j.Ref, page: j.WebURL, pipeline: j.Pipeline.ID}, nil
}

// statusName is the status's name: the GitLab job's, or the step's.
func statusName(d Delivery) string {
	if d.Target.Job != "" {
		return StatusName(d.Target.Job)
	}
	return CheckRunName(d)
}

// statuses are the commit's statuses of the delivery's name.
func (s *GitLabSender) statuses(ctx context.Context, c *gitlab.Client, d Delivery, sha string) ([]*gitlab.CommitStatus, error) {
	name := statusName(d)
	opt := &gitlab.GetCommitStatusesOptions{Name: gitlab.Ptr(name), All: gitlab.Ptr(true)}
	sts, resp, err := c.Commits.GetCommitStatuses(d.Target.Project, sha, opt, gitlab.WithContext(ctx))
	if err != nil {
		return nil, failure(response(resp), fmt.Errorf("listing statuses of %s: %w", sha, err), s.Now())
	}
	return slices.DeleteFunc(sts, func(st *gitlab.CommitStatus) bool { return st.Name != name }), nil
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
	at, err := s.where(ctx, c, d)
	if err != nil {
		return "", false, err
	}
	sts, err := s.statuses(ctx, c, d, at.sha)
	if err != nil {
		return "", false, err
	}
	want := Description(d.Shown())
	if slices.ContainsFunc(sts, func(st *gitlab.CommitStatus) bool { return st.Description == want }) {
		return cmp.Or(at.page, "commit "+at.sha+" of project "+d.Target.Project), true, nil
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
	at, err := s.where(ctx, c, d)
	if err != nil {
		return "", err
	}
	state := State(d.Record)
	if state == gitlab.Skipped {
		sts, err := s.statuses(ctx, c, d, at.sha)
		if err != nil {
			return "", err
		}
		state = StateOver(d.Record, Running(sts))
	}
	return s.set(ctx, c, d, at, state, Description(d.Shown()))
}

// set sets the job's status on its commit, in its pipeline where GitLab
// named one.
func (s *GitLabSender) set(ctx context.Context, c *gitlab.Client, d Delivery, at commit, state gitlab.BuildStateValue, description string) (string, error) {
	opt := &gitlab.SetCommitStatusOptions{State: state, Name: gitlab.Ptr(statusName(d)), Description: gitlab.Ptr(description)}
	if at.ref != "" {
		opt.Ref = gitlab.Ptr(at.ref)
	}
	if at.page != "" {
		opt.TargetURL = gitlab.Ptr(at.page)
	}
	if at.pipeline != 0 {
		opt.PipelineID = gitlab.Ptr(at.pipeline)
	}
	st, resp, err := c.Commits.SetCommitStatus(d.Target.Project, at.sha, opt, gitlab.WithContext(ctx))
	if err != nil {
		return "", failure(response(resp), fmt.Errorf("setting the status of %s: %w", at.sha, err), s.Now())
	}
	return cmp.Or(at.page, st.TargetURL, "commit "+at.sha+" of project "+d.Target.Project), nil
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
	at, err := s.where(ctx, c, d)
	if err != nil {
		return "", err
	}
	sts, err := s.statuses(ctx, c, d, at.sha)
	if err != nil {
		return "", err
	}
	switch StallWrite(sd.Stall.Phase, Running(sts)) {
	case StallOpen:
		return s.set(ctx, c, d, at, gitlab.Running, StallDescription(sd.Shown()))
	case StallComplete:
		return s.set(ctx, c, d, at, gitlab.Success, StallDescription(sd.Shown()))
	}
	return cmp.Or(at.page, "commit "+at.sha+" of project "+d.Target.Project), nil
}

func response(r *gitlab.Response) *http.Response {
	if r == nil {
		return nil
	}
	return r.Response
}
