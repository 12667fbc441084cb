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
// commit, as a GitHub App installation, or completes the in-progress run
// of the runner's stall. The commit is GitHub's answer for
// the run the EphemeralRunner named, in the repository it named.
type GitHubSender struct {
	// BaseURL: https://api.github.com/, or a GitHub Enterprise Server's
	// https://HOST/api/v3/.
	BaseURL string
	AppID   int64
	// InstallationID is the App's one installation; 0 looks up the
	// installation of each report's repository, so one App installed on
	// several organisations (or an enterprise) reports to each.
	InstallationID int64
	// Key is the App's private key (PEM), read from the Secret at each
	// report; a changed key makes new transports.
	Key       func(ctx context.Context) ([]byte, error)
	Transport http.RoundTripper
	Now       func() time.Time

	mu    sync.Mutex
	key   string
	app   *ghinstallation.AppsTransport
	inst  map[int64]*ghinstallation.Transport
	found map[string]found // repository -> its installation, as looked up
}

// client is a client of the installation that may act on repository.
func (s *GitHubSender) client(ctx context.Context, repository string) (*github.Client, error) {
	key, err := s.Key(ctx)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.app == nil || s.key != string(key) {
		base := s.Transport
		if base == nil {
			base = http.DefaultTransport
		}
		app, err := ghinstallation.NewAppsTransport(base, s.AppID, key)
		if err != nil {
			return nil, fmt.Errorf("the GitHub App's private key: %w", err)
		}
		app.BaseURL = strings.TrimRight(s.BaseURL, "/")
		s.app, s.key, s.inst, s.found = app, string(key), map[int64]*ghinstallation.Transport{}, map[string]found{}
	}
	id := s.InstallationID
	if id == 0 {
		if id, err = s.installation(ctx, repository); err != nil {
			return nil, err
		}
	}
	tr, ok := s.inst[id]
	if !ok {
		tr = ghinstallation.NewFromAppsTransport(s.app, id)
		s.inst[id] = tr
	}
	return s.api(tr)
}

// found is a repository's installation and when it was looked up.
type found struct {
	id int64
	at time.Time
}

// installationKept is how long a repository's installation is taken as
// looked up: an App removed and installed again there has a new one.
const installationKept = time.Hour

// installation asks GitHub, as the App, which of its installations covers
// repository (owner/name); the answer is kept.
func (s *GitHubSender) installation(ctx context.Context, repository string) (int64, error) {
	if f, ok := s.found[repository]; ok && s.Now().Sub(f.at) < installationKept {
		return f.id, nil
	}
	c, err := s.api(s.app)
	if err != nil {
		return 0, err
	}
	owner, repo, _ := strings.Cut(repository, "/")
	inst, resp, err := c.Apps.FindRepositoryInstallation(ctx, owner, repo)
	if err != nil {
		return 0, githubFailure(resp, fmt.Errorf("finding the App's installation on %s (is the App installed there?): %w", repository, err), s.Now())
	}
	s.found[repository] = found{inst.GetID(), s.Now()}
	return inst.GetID(), nil
}

func (s *GitHubSender) api(tr http.RoundTripper) (*github.Client, error) {
	c := github.NewClient(&http.Client{Transport: tr})
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

// head is the commit the check run goes on and the workflow run's page
// ("" for none): GitHub's answer for the run the EphemeralRunner named,
// or the target's own commit (Woodpecker's), in a repository held to the
// target's id, since its name is the pipeline's word.
func (s *GitHubSender) head(ctx context.Context, c *github.Client, d Delivery) (sha, page string, err error) {
	owner, repo, _ := strings.Cut(d.Target.Repository, "/")
	if d.Target.Commit != "" {
		r, resp, err := c.Repositories.Get(ctx, owner, repo)
		if err != nil {
			return "", "", githubFailure(resp, fmt.Errorf("reading repository %s: %w", d.Target.Repository, err), s.Now())
		}
		if id := strconv.FormatInt(r.GetID(), 10); id != d.Target.RepositoryID {
			return "", "", &NotTold{Reason: fmt.Sprintf("repository %s has id %s, not the step's forge id %s", d.Target.Repository, id, d.Target.RepositoryID)}
		}
		return d.Target.Commit, "", nil
	}
	id, err := strconv.ParseInt(d.Target.Run, 10, 64)
	if err != nil {
		return "", "", &Failure{Err: fmt.Errorf("workflow run %q: %w", d.Target.Run, err)}
	}
	run, resp, err := c.Actions.GetWorkflowRunByID(ctx, owner, repo, id)
	if err != nil {
		return "", "", githubFailure(resp, fmt.Errorf("reading workflow run %s of %s: %w", d.Target.Run, d.Target.Repository, err), s.Now())
	}
	if run.GetHeadSHA() == "" {
		return "", "", &Failure{Err: fmt.Errorf("workflow run %s of %s names no head commit", d.Target.Run, d.Target.Repository)}
	}
	return run.GetHeadSHA(), run.GetHTMLURL(), nil
}

// details is the check run's link to the job's page: the workflow run's
// job, for a job GitHub numbers; none otherwise.
func details(d Delivery, page string) *string {
	if j := d.Record.Job; j != nil && number.MatchString(j.ID) && page != "" {
		return github.Ptr(page + "/job/" + j.ID)
	}
	return nil
}

// checkCommit is where a delivery is told (GitLab's twin: commit): the App's client for its
// repository, the job's head commit and its page, and the App's check runs
// of the delivery's name on that commit.
type checkCommit struct {
	c         *github.Client
	sha, page string
	runs      []*github.CheckRun
}

// onCommit reads d's commit, as every call of the sender begins.
func (s *GitHubSender) onCommit(ctx context.Context, d Delivery) (checkCommit, error) {
	c, err := s.client(ctx, d.Target.Repository)
	if err != nil {
		return checkCommit{}, err
	}
	sha, page, err := s.head(ctx, c, d)
	if err != nil {
		return checkCommit{}, err
	}
	runs, err := s.checkRuns(ctx, c, d, sha)
	return checkCommit{c, sha, page, runs}, err
}

// checkRuns are the App's check runs of the delivery's name on sha.
func (s *GitHubSender) checkRuns(ctx context.Context, c *github.Client, d Delivery, sha string) ([]*github.CheckRun, error) {
	owner, repo, _ := strings.Cut(d.Target.Repository, "/")
	opt := &github.ListCheckRunsOptions{CheckName: github.Ptr(CheckRunName(d)), Filter: github.Ptr("all"), AppID: github.Ptr(s.AppID)}
	res, resp, err := c.Checks.ListCheckRunsForRef(ctx, owner, repo, sha, opt)
	if err != nil {
		return nil, githubFailure(resp, fmt.Errorf("listing check runs of %s: %w", sha, err), s.Now())
	}
	return res.CheckRuns, nil
}

// Newest is the newest of runs whose external_id is id, nil when none
// is: a pod that stalled again after it recovered has a run per stall.
func Newest(runs []*github.CheckRun, id string) *github.CheckRun {
	var out *github.CheckRun
	for _, cr := range runs {
		if cr.GetExternalID() == id && (out == nil || cr.GetID() > out.GetID()) {
			out = cr
		}
	}
	return out
}

// Find looks for the check run by its external_id, the record's UID.
func (s *GitHubSender) Find(ctx context.Context, d Delivery) (string, bool, error) {
	at, err := s.onCommit(ctx, d)
	if err != nil {
		return "", false, err
	}
	if cr := Newest(at.runs, d.ID); cr != nil {
		return cr.GetHTMLURL(), true, nil
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

// Send completes the check run of the runner's stall, when its pod's
// stall was told, so that the commit shows one run for the runner; else
// it creates the check run, completed. Either way with the death's
// Conclusion and the record's UID as its external_id.
func (s *GitHubSender) Send(ctx context.Context, d Delivery) (string, error) {
	at, err := s.onCommit(ctx, d)
	if err != nil {
		return "", err
	}
	c, sha, page, runs := at.c, at.sha, at.page, at.runs
	if cr := Newest(runs, d.ID); cr != nil {
		return cr.GetHTMLURL(), nil
	}
	owner, repo, _ := strings.Cut(d.Target.Repository, "/")
	shown := d.Shown()
	output := &github.CheckRunOutput{Title: github.Ptr(Title(shown)), Summary: github.Ptr(Summary(shown, d.Target.LastWords))}
	details := details(d, page)
	if stalled := Newest(runs, StallExternalID(d.Record.UID)); stalled != nil {
		cr, resp, err := c.Checks.UpdateCheckRun(ctx, owner, repo, stalled.GetID(), github.UpdateCheckRunOptions{
			Name: CheckRunName(d), ExternalID: github.Ptr(d.ID), DetailsURL: details,
			Status: github.Ptr("completed"), Conclusion: github.Ptr(Conclusion(d.Record)), CompletedAt: &github.Timestamp{Time: s.Now()},
			Output: output,
		})
		if err != nil {
			return "", githubFailure(resp, fmt.Errorf("completing the stall's check run %d on %s: %w", stalled.GetID(), sha, err), s.Now())
		}
		return cr.GetHTMLURL(), nil
	}
	cr, resp, err := c.Checks.CreateCheckRun(ctx, owner, repo, github.CreateCheckRunOptions{
		Name: CheckRunName(d), HeadSHA: sha, ExternalID: github.Ptr(d.ID), DetailsURL: details,
		Status: github.Ptr("completed"), Conclusion: github.Ptr(Conclusion(d.Record)), CompletedAt: &github.Timestamp{Time: s.Now()},
		Output: output,
	})
	if err != nil {
		return "", githubFailure(resp, fmt.Errorf("creating the check run on %s: %w", sha, err), s.Now())
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
