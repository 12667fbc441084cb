package notify

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v75/github"
)

// TellStall opens the stall's check run (in progress) or completes it
// (neutral), as StallWrite decides from the App's runs on the commit.
func (s *GitHubSender) TellStall(ctx context.Context, sd StallDelivery) (string, error) {
	d := Delivery{Record: sd.Stall.Record, Target: sd.Target}
	at, err := s.onCommit(ctx, d)
	if err != nil {
		return "", err
	}
	c, sha, page, runs := at.c, at.sha, at.page, at.runs
	id := StallExternalID(d.Record.UID)
	told := Newest(runs, id)
	open := told != nil && told.GetStatus() != "completed"
	owner, repo, _ := strings.Cut(d.Target.Repository, "/")
	shown := sd.Shown()
	output := &github.CheckRunOutput{Title: github.Ptr(StallTitle(shown)), Summary: github.Ptr(StallSummary(shown))}
	details := details(d, page)
	switch StallWrite(sd.Stall.Phase, open) {
	case StallOpen:
		cr, resp, err := c.Checks.CreateCheckRun(ctx, owner, repo, github.CreateCheckRunOptions{
			Name: CheckRunName(d), HeadSHA: sha, ExternalID: github.Ptr(id), DetailsURL: details,
			Status: github.Ptr("in_progress"), StartedAt: &github.Timestamp{Time: sd.Stall.Began}, Output: output,
		})
		if err != nil {
			return "", githubFailure(resp, fmt.Errorf("creating the stall's check run on %s: %w", sha, err), s.Now())
		}
		return cr.GetHTMLURL(), nil
	case StallComplete:
		cr, resp, err := c.Checks.UpdateCheckRun(ctx, owner, repo, told.GetID(), github.UpdateCheckRunOptions{
			Name: CheckRunName(d), Status: github.Ptr("completed"), Conclusion: github.Ptr(StallConclusion),
			CompletedAt: &github.Timestamp{Time: s.Now()}, Output: output,
		})
		if err != nil {
			return "", githubFailure(resp, fmt.Errorf("completing the stall's check run %d on %s: %w", told.GetID(), sha, err), s.Now())
		}
		return cr.GetHTMLURL(), nil
	}
	return told.GetHTMLURL(), nil
}
