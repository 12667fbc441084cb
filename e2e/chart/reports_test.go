package chart_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The reports' values become the server's config, and the leader may read
// exactly the Secrets that config names, no other.
func TestReportsValuesReachTheConfigAndTheLeaderReadsOnlyTheirSecrets(t *testing.T) {
	values := `
reports:
  namespaces: [ci]
  presets: [gitlab]
  disclose: {namespaces: [private-ci], presets: [arc-legacy]}
  github: {enabled: true, url: "https://ghes.example.com/api/v3/", appID: 12, installationID: 34, secret: gh-app, controllers: [system:serviceaccount:arc-systems:arc-gha-rs-controller]}
  gitlab: {enabled: true, url: "https://gitlab.example.com", secret: gl-token, managers: [system:serviceaccount:gitlab-runner:gitlab-runner]}
  sinks: [{name: alerts, url: "https://hooks.example.com/rg", secret: gl-token, lastWords: true}]
`
	objs := helms(t)[0].render(t, values)
	cfg := renderedConfig(t, objs)
	assert.Equal(t, config.Reports{Namespaces: []string{"ci"}, Presets: []runnerpod.PresetName{"gitlab"}, SecretNamespace: cfg.Reports.SecretNamespace,
		MaxAttempts: 6, MaxAge: metav1.Duration{Duration: time.Hour},
		Disclose: config.Selection{Namespaces: []string{"private-ci"}, Presets: []runnerpod.PresetName{"arc-legacy"}},
		GitHub:   &config.GitHub{URL: "https://ghes.example.com/api/v3/", AppID: 12, InstallationID: 34, Secret: "gh-app", Controllers: []string{"system:serviceaccount:arc-systems:arc-gha-rs-controller"}},
		GitLab:   &config.GitLab{URL: "https://gitlab.example.com", Secret: "gl-token", Managers: []string{"system:serviceaccount:gitlab-runner:gitlab-runner"}},
		Sinks:    []config.Sink{{Name: "alerts", URL: "https://hooks.example.com/rg", Secret: "gl-token", LastWords: true}}}, cfg.Reports)
	assert.NotEmpty(t, cfg.Reports.SecretNamespace)
	assert.True(t, cfg.Reports.Enabled())
	var role rbacv1.Role
	objs.get(t, "Role", release+"-reports", &role)
	require.Len(t, role.Rules, 1)
	assert.Equal(t, []string{"secrets"}, role.Rules[0].Resources)
	assert.Equal(t, []string{"get"}, role.Rules[0].Verbs)
	assert.ElementsMatch(t, cfg.Reports.SecretNames(), role.Rules[0].ResourceNames, "only the Secrets the config names")
	assert.Equal(t, cfg.Reports.SecretNamespace, role.Namespace)
}

func TestReportsAreOffByDefaultAndReadNoSecret(t *testing.T) {
	objs := helms(t)[0].render(t, "")
	assert.False(t, renderedConfig(t, objs).Reports.Enabled())
	on := helms(t)[0].render(t, "reports: {namespaces: [ci], github: {enabled: true, appID: 1, installationID: 2, secret: gh, controllers: [arc]}}")
	assert.Equal(t, config.Selection{}, renderedConfig(t, on).Reports.Disclose, "reports name no principal, node or UID by default")
	assert.Nil(t, objs.find("Role", release+"-reports"))
}

// GitHub reports without ARC's controllers named would be refused by the
// server's config check at start: the install fails first and says so.
func TestGitHubReportsWithoutARCsControllersFailTheInstall(t *testing.T) {
	_, err := helm4(t).template(t, "reports: {namespaces: [ci], github: {enabled: true, appID: 1, secret: gh}}")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "reports.github.controllers: name ARC's controllers")
}

// Buildkite's and Woodpecker's reports reach the config: Buildkite's
// creators default to the job controller, its token's Secret is read;
// Woodpecker's steps go through GitHub, which then needs no ARC
// controllers.
func TestBuildkiteAndWoodpeckerReportsReachTheConfig(t *testing.T) {
	values := `
reports:
  presets: [buildkite, woodpecker]
  github: {enabled: true, appID: 12, installationID: 34, secret: gh-app}
  buildkite: {enabled: true, secret: bk-token}
  woodpecker: {enabled: true, agents: [system:serviceaccount:woodpecker:woodpecker-agent]}
`
	objs := helms(t)[0].render(t, values)
	cfg := renderedConfig(t, objs)
	assert.Equal(t, &config.Buildkite{URL: "https://api.buildkite.com/", Secret: "bk-token", Creators: []string{"system:serviceaccount:kube-system:job-controller"}}, cfg.Reports.Buildkite)
	assert.Equal(t, &config.Woodpecker{Agents: []string{"system:serviceaccount:woodpecker:woodpecker-agent"}}, cfg.Reports.Woodpecker)
	assert.Empty(t, cfg.Reports.GitHub.Controllers)
	var role rbacv1.Role
	objs.get(t, "Role", release+"-reports", &role)
	require.Len(t, role.Rules, 1)
	assert.ElementsMatch(t, []string{"gh-app", "bk-token"}, role.Rules[0].ResourceNames)

	_, err := helm4(t).template(t, "reports: {namespaces: [ci], woodpecker: {enabled: true, agents: [a]}, sinks: [{name: s, url: 'https://x.example.com/', secret: s}]}")
	require.Error(t, err, "Woodpecker's steps are told through their forge's reports")
	assert.Contains(t, err.Error(), "reports.woodpecker: a step's death is told through reports.github or reports.gitlab")
}
