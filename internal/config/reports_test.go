package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReportsConfig(t *testing.T) {
	for _, c := range []struct {
		name    string
		yaml    string
		enabled bool
		wantErr []string
	}{
		{name: "reports are off by default", yaml: "{}"},
		{name: "a destination without an opt-in tells nothing", yaml: "reports: {secretNamespace: rg, sinks: [{name: a, url: 'https://x.example.com/', secret: s}]}"},
		{name: "a namespace's opt-in with a sink tells", yaml: "reports: {namespaces: [ci], secretNamespace: rg, sinks: [{name: a, url: 'https://x.example.com/', secret: s}]}", enabled: true},
		{name: "GitLab needs its managers, for only their pods' projects are trusted", yaml: "reports: {namespaces: [ci], secretNamespace: rg, gitlab: {url: 'https://gitlab.com', secret: gl}}",
			wantErr: []string{"reports.gitlab.managers: the GitLab Runner managers' usernames are needed"}},
		{name: "GitHub needs the App", yaml: "reports: {namespaces: [ci], secretNamespace: rg, github: {url: 'https://api.github.com/', secret: gh, installationID: -1}}",
			wantErr: []string{"reports.github: appID is needed, and installationID is an installation's id or 0 (each repository's)"}},
		{name: "an App without an installation id reports to each repository's installation", yaml: "reports: {namespaces: [ci], secretNamespace: rg, github: {url: 'https://api.github.com/', secret: gh, appID: 7, controllers: [system:serviceaccount:arc-systems:arc-gha-rs-controller]}}", enabled: true},
		{name: "GitHub needs ARC's controllers, for only their pods' repositories are trusted", yaml: "reports: {namespaces: [ci], secretNamespace: rg, github: {url: 'https://api.github.com/', secret: gh, appID: 7}}",
			wantErr: []string{"reports.github.controllers: ARC's controllers' usernames are needed: a runner pod's repository is trusted only when one of them created the pod"}},
		{name: "a disclosure names known presets", yaml: "reports: {namespaces: [ci], secretNamespace: rg, disclose: {presets: [nope]}, sinks: [{name: a, url: 'https://x.example.com/', secret: s}]}",
			wantErr: []string{`reports.disclose.presets: unknown preset "nope"`}},
		{name: "bad URLs, Secret names and sink names are named", yaml: "reports: {presets: [nope], secretNamespace: rg, maxAttempts: 0, sinks: [{name: A, url: 'ftp://x', secret: 'Bad_Name'}, {name: A, url: 'https://x', secret: s}]}",
			wantErr: []string{`reports.presets: unknown preset "nope"`, "reports.maxAttempts: 0 is below 1", `reports.sinks[0].name: "A" must be a unique DNS label`, `reports.sinks[0].url: "ftp://x" is not an http(s) URL`, `reports.sinks[0].secret: "Bad_Name" is not a Secret's name`, `reports.sinks[1].name`}},
		{name: "Buildkite needs the creators of the stack's pods", yaml: "reports: {namespaces: [ci], secretNamespace: rg, buildkite: {url: 'https://api.buildkite.com/', secret: bk}}",
			wantErr: []string{"reports.buildkite.creators: the usernames that create the stack's job pods are needed"}},
		{name: "Buildkite alone tells", yaml: "reports: {namespaces: [ci], secretNamespace: rg, buildkite: {url: 'https://api.buildkite.com/', secret: bk, creators: [system:serviceaccount:kube-system:job-controller]}}", enabled: true},
		{name: "Woodpecker needs its agents and its forge's reports", yaml: "reports: {namespaces: [ci], secretNamespace: rg, woodpecker: {}, sinks: [{name: a, url: 'https://x.example.com/', secret: s}]}",
			wantErr: []string{"reports.woodpecker.agents: the Woodpecker agents' usernames are needed", "reports.woodpecker: a step's death is told through reports.github or reports.gitlab"}},
		{name: "GitHub for Woodpecker's steps alone needs no ARC controllers", yaml: "reports: {namespaces: [ci], secretNamespace: rg, github: {url: 'https://api.github.com/', secret: gh, appID: 7}, woodpecker: {agents: [system:serviceaccount:woodpecker:woodpecker-agent]}}", enabled: true},
		{name: "Secrets need their namespace", yaml: "reports: {namespaces: [ci], sinks: [{name: a, url: 'https://x.example.com/', secret: s}]}",
			wantErr: []string{"reports.secretNamespace: the Secrets' namespace is needed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.yaml))
			if len(c.wantErr) > 0 {
				require.Error(t, err)
				for _, w := range c.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.enabled, cfg.Reports.Enabled())
		})
	}
}
