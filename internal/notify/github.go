package notify

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v75/github"

	"github.com/runnerguard/runnerguard/internal/death"
)

// GitHubSender creates a completed check run on the workflow run's head
// commit, as a GitHub App installation. The commit is GitHub's answer for
// the run the EphemeralRunner named, in the repository it named.
type GitHubSender struct {
	// BaseURL: https://api.github.com/, or a GitHub Enterprise Server's
	// https://HOST/api/v3/.
	BaseURL        string
	AppID          int64
	InstallationID int64
	// Key is the App's private key (PEM), read from the Secret at each
	// report; a changed key makes a new installation transport.
	Key       func(ctx context.Context) ([]byte, error)
	Transport http.RoundTripper
	Now       func() time.Time

	mu  sync.Mutex
	key string
	tr  *ghinstallation.Transport
}

func (s *GitHubSender) client(ctx context.Context) (*github.Client, error) {
	key, err := s.Key(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tr == nil || s.key != string(key) {
		base := s.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		tr, err := ghinstallation.New(base, s.AppID, s.InstallationID, key)
		if err != nil {
			return nil, fmt.Errorf("the GitHub App's private key: %w", err)
		}
		tr.BaseURL = strings.TrimRight(s.BaseURL, "/")
		s.tr, s.key = tr, string(key)
	}
	c := github.NewClient(&http.Client{Transport: s.tr})
	u, err := url.Parse(strings.TrimRight(s.BaseURL, "/") + "/")
	if err != nil {
		return nil, err
	}
	c.BaseURL = u
	return c, nil
}

// CheckRunName names the check run for the job, so that the deaths of a
// workflow run's jobs on one commit are told apart.
func CheckRunName(d Delivery) string {
	j := d.Record.Job
	if j != nil && j.Name != "" {
		return cut(CheckName+": "+line(j.Name), 100)
	}
	if j != nil && j.ID != "" {
		return cut(CheckName+": job "+line(j.ID), 100)
	}
	return CheckName
}

func (s *GitHubSender) run(ctx context.Context, c *github.Client, d Delivery) (*github.WorkflowRun, error) {
	owner, repo, _ := strings.Cut(d.Target.Repository, "/")
	id, err := strconv.ParseInt(d.Target.Run, 10, 64)
	if err != nil {
		return nil, &Failure{Err: fmt.Errorf("workflow run %q: %w", d.Target.Run, err)}
	}
	run, resp, err := c.Actions.GetWorkflowRunByID(ctx, owner, repo, id)
	if err != nil {
		return nil, githubFailure(resp, fmt.Errorf("reading workflow run %s of %s: %w", d.Target.Run, d.Target.Repository, err), s.Now())
	}
	if run.GetHeadSHA() == "" {
		return nil, &Failure{Err: fmt.Errorf("workflow run %s of %s names no head commit", d.Target.Run, d.Target.Repository)}
	}
	return run, nil
}

// Find looks for the check run by its external_id, the record's UID.
func (s *GitHubSender) Find(ctx context.Context, d Delivery) (string, bool, error) {
	c, err := s.client(ctx)
	if err != nil {
		return "", false, err
	}
	run, err := s.run(ctx, c, d)
	if err != nil {
		return "", false, err
	}
	owner, repo, _ := strings.Cut(d.Target.Repository, "/")
	opt := &github.ListCheckRunsOptions{CheckName: github.Ptr(CheckRunName(d)), Filter: github.Ptr("all"), AppID: github.Ptr(s.AppID)}
	res, resp, err := c.Checks.ListCheckRunsForRef(ctx, owner, repo, run.GetHeadSHA(), opt)
	if err != nil {
		return "", false, githubFailure(resp, fmt.Errorf("listing check runs of %s: %w", run.GetHeadSHA(), err), s.Now())
	}
	for _, cr := range res.CheckRuns {
		if cr.GetExternalID() == d.ID {
			return cr.GetHTMLURL(), true, nil
		}
	}
	return "", false, nil
}

// Conclusion is the check run's: neutral for a runner ended on purpose,
// which GitHub counts as passing for a required check, so that a re-run
// that passes leaves the commit green; failure for any other death.
func Conclusion(r death.Record) string {
	if r.Deliberate() {
		return "neutral"
	}
	return "failure"
}

// Send creates the check run, completed, with its Conclusion.
func (s *GitHubSender) Send(ctx context.Context, d Delivery) (string, error) {
	c, err := s.client(ctx)
	if err != nil {
		return "", err
	}
	run, err := s.run(ctx, c, d)
	if err != nil {
		return "", err
	}
	owner, repo, _ := strings.Cut(d.Target.Repository, "/")
	shown := d.Shown()
	opt := github.CreateCheckRunOptions{
		Name: CheckRunName(d), HeadSHA: run.GetHeadSHA(), ExternalID: github.Ptr(d.ID),
		Status: github.Ptr("completed"), Conclusion: github.Ptr(Conclusion(d.Record)),
		CompletedAt: &github.Timestamp{Time: s.Now()},
		Output:      &github.CheckRunOutput{Title: github.Ptr(Title(shown)), Summary: github.Ptr(Summary(shown, d.Target.LastWords))},
	}
	if j := d.Record.Job; j != nil && number.MatchString(j.ID) && run.GetHTMLURL() != "" {
		opt.DetailsURL = github.Ptr(run.GetHTMLURL() + "/job/" + j.ID)
	}
	cr, resp, err := c.Checks.CreateCheckRun(ctx, owner, repo, opt)
	if err != nil {
		return "", githubFailure(resp, fmt.Errorf("creating the check run on %s: %w", run.GetHeadSHA(), err), s.Now())
	}
	return cr.GetHTMLURL(), nil
}

// githubFailure reads the wait from the response: GitHub's secondary
// limits answer 403 or 429 with Retry-After or a spent rate limit.
func githubFailure(resp *github.Response, err error, now time.Time) error {
	if resp == nil {
		return failure(nil, err, now)
	}
	return failure(resp.Response, err, now)
}
