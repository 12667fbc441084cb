package notify_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/internal/notify"
	"github.com/runnerguard/runnerguard/internal/notify/notifytest"
)

// GitHub's answer: the job of the run that went to the runner, found
// across pages, completed or not.
func TestGitHubSaysWhenARunnersJobEnded(t *testing.T) {
	gh := notifytest.NewGitHub(11, 22, map[string]string{"acme/app/900123": "0123456789abcdef0123456789abcdef01234567"})
	defer gh.Close()
	completed := time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC)
	for i := range 130 {
		gh.SetJob("acme/app/900123", notifytest.WorkflowJob{ID: int64(1000 + i), RunnerName: fmt.Sprintf("runner-%d", i), Status: "in_progress"})
	}
	gh.SetJob("acme/app/900123", notifytest.WorkflowJob{ID: 2000, RunnerName: "arc-runner-x7k2p", Status: "completed", CompletedAt: completed})
	s := &notify.GitHubSender{BaseURL: gh.URL(), AppID: 11, InstallationID: 22, Now: time.Now,
		Key: func(context.Context) ([]byte, error) { return gh.Key, nil }}
	target := notify.Target{Destination: notify.GitHub, Repository: "acme/app", Run: "900123"}

	at, ended, err := s.JobEnded(context.Background(), target, "arc-runner-x7k2p")
	require.NoError(t, err)
	assert.True(t, ended, "found on the second page")
	assert.Equal(t, completed, at.UTC())
	_, ended, err = s.JobEnded(context.Background(), target, "runner-7")
	require.NoError(t, err)
	assert.False(t, ended, "a job in progress")
	_, ended, err = s.JobEnded(context.Background(), target, "no-such-runner")
	require.NoError(t, err)
	assert.False(t, ended, "a runner the run never gave a job")
	assert.Empty(t, gh.Errors(), "every request had the published shape")
}

func TestGitLabSaysWhenAJobFinished(t *testing.T) {
	finished := time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC)
	gl := notifytest.NewGitLab("glpat-fake", notifytest.Job{Project: "1234", ID: "42", SHA: "0123456789abcdef0123456789abcdef01234567", Ref: "main", Pipeline: 7},
		notifytest.Job{Project: "1234", ID: "43", SHA: "0123456789abcdef0123456789abcdef01234567", Ref: "main", Pipeline: 7, Status: "success", FinishedAt: finished})
	defer gl.Close()
	s := &notify.GitLabSender{BaseURL: gl.URL, Now: time.Now, Token: func(context.Context) (string, error) { return "glpat-fake", nil }}

	_, ended, err := s.JobEnded(context.Background(), notify.Target{Destination: notify.GitLab, Project: "1234", Job: "42"}, "")
	require.NoError(t, err)
	assert.False(t, ended, "a running job")
	at, ended, err := s.JobEnded(context.Background(), notify.Target{Destination: notify.GitLab, Project: "1234", Job: "43"}, "")
	require.NoError(t, err)
	assert.True(t, ended)
	assert.Equal(t, finished, at.UTC())
	_, _, err = s.JobEnded(context.Background(), notify.Target{Destination: notify.GitLab, Project: "1234", Job: "99"}, "")
	assert.Error(t, err, "a job GitLab does not know")
}
