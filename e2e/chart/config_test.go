package chart_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/runnerguard/runnerguard/internal/config"
	"github.com/runnerguard/runnerguard/internal/fleet/arcscaleset"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

// The values become the server's config: the defaults are the built-in
// defaults (so the two cannot drift apart unnoticed), and each value lands
// where the server reads it.
func TestConfigFromValues(t *testing.T) {
	cases := []struct {
		name   string
		values string
		want   func(c *config.Config, image string)
	}{
		{
			name: "defaults are the built-in config, with the chart's own image for the sidecar",
			want: func(c *config.Config, image string) { c.Inject.Vitals.Image = image },
		},
		{
			name:   "the sidecar image follows the chart's image tag",
			values: "image: {tag: 1.2.3}",
			want: func(c *config.Config, _ string) {
				c.Inject.Vitals.Image = "ghcr.io/runnerguard/runnerguard:1.2.3"
			},
		},
		{
			name:   "an explicit sidecar image wins",
			values: "inject: {vitals: {image: registry.local/vitals:dev, imagePullPolicy: Always}}",
			want: func(c *config.Config, _ string) {
				c.Inject.Vitals.Image = "registry.local/vitals:dev"
				c.Inject.Vitals.ImagePullPolicy = corev1.PullAlways
			},
		},
		{
			name:   "the cluster's Pod Security default reaches the injector",
			values: "inject: {podSecurityDefault: baseline}",
			want: func(c *config.Config, image string) {
				c.Inject.Vitals.Image = image
				c.Inject.PodSecurityDefault = config.PodSecurityBaseline
			},
		},
		{
			name:   "a home-grown pool names the labels and annotations of its jobs",
			values: `presets: {generic: {job: {id: {label: ci.example.com/job-id}, url: {annotation: ci.example.com/job-url}}}}`,
			want: func(c *config.Config, image string) {
				c.Inject.Vitals.Image = image
				for i, p := range c.Presets {
					if p.Name == generic.Name {
						c.Presets[i].Job = runnerpod.JobKeys{ID: runnerpod.PodKey{Label: "ci.example.com/job-id"}, URL: runnerpod.PodKey{Annotation: "ci.example.com/job-url"}}
					}
				}
			},
		},
		{
			name: "the presets named are on, and preset settings replace that preset's defaults",
			values: `presets:
  enabled: [gitlab, arc-scale-set]
  gitlab: {runnerContainers: [build, step], diagnosticEnv: [{name: CI_DEBUG_SERVICES, value: "true"}]}`,
			want: func(c *config.Config, image string) {
				c.Inject.Vitals.Image = image
				for i, p := range c.Presets {
					switch p.Name {
					case gitlab.Name:
						c.Presets[i].Enabled = true
						c.Presets[i].RunnerContainers = []string{"build", "step"}
						c.Presets[i].DiagnosticEnv = []corev1.EnvVar{{Name: "CI_DEBUG_SERVICES", Value: "true"}}
					case arcscaleset.Name:
						c.Presets[i].Enabled = true
					}
				}
			},
		},
		{
			name:   "principals, sidecar settings and annotations reach the config",
			values: "guard: {exemptPrincipals: [system:serviceaccount:infra:reaper], zombieReapers: [system:serviceaccount:infra:stuck-reaper], endZombiesAfter: 2h}\npresets: {gitlab: {ownerPrincipals: [system:serviceaccount:ci:gitlab-runner], maxProtected: 2h}}\ninject: {terminationMessagePolicy: false, podAnnotations: {example.com/team: ci}, vitals: {enabled: false, interval: 750ms, mountPath: /vitals, cgroupHostPath: /host/cgroup}}",
			want: func(c *config.Config, image string) {
				c.Guard.ExemptPrincipals = []string{"system:serviceaccount:infra:reaper"}
				c.Guard.ZombieReapers = []string{"system:serviceaccount:infra:stuck-reaper"}
				c.Guard.EndZombiesAfter.Duration = 2 * time.Hour
				c.Presets[1].OwnerPrincipals = []string{"system:serviceaccount:ci:gitlab-runner"}
				c.Presets[1].MaxProtected.Duration = 2 * time.Hour
				c.Inject.TerminationMessagePolicy = false
				c.Inject.PodAnnotations = map[string]string{"example.com/team": "ci"}
				c.Inject.Vitals.Enabled = false
				c.Inject.Vitals.Image = image
				c.Inject.Vitals.Interval.Duration = 750 * time.Millisecond
				c.Inject.Vitals.MountPath = "/vitals"
				c.Inject.Vitals.CgroupHostPath = "/host/cgroup"
			},
		},
		{
			name:   "each autoscaler's marks and the budgets can be turned off, and Karpenter's duration form on",
			values: "marks: {karpenter: false, clusterAutoscaler: false, budgets: false, karpenterDuration: true}",
			want: func(c *config.Config, image string) {
				c.Inject.Vitals.Image = image
				c.Marks = config.Marks{KarpenterDuration: true}
			},
		},
		{
			name:   "the mode is not in the config (the registrations select it): rollout leaves it at the default",
			values: "guard: {rollout: enforce}",
			want:   func(c *config.Config, image string) { c.Inject.Vitals.Image = image },
		},
		{
			name:   "GitLab's opt-in to a manager in the build pods' namespace reaches the config",
			values: "presets: {gitlab: {ownerPrincipals: [system:serviceaccount:ci:gitlab-runner], ownerInRunnerNamespace: true}}",
			want: func(c *config.Config, image string) {
				c.Inject.Vitals.Image = image
				c.Presets[1].OwnerPrincipals = []string{"system:serviceaccount:ci:gitlab-runner"}
				c.Presets[1].OwnerInRunnerNamespace = true
			},
		},
	}
	for _, h := range helms(t) {
		for _, tc := range cases {
			t.Run(h.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				want := config.Default()
				tc.want(&want, chartImage(t))
				assert.Equal(t, want, renderedConfig(t, h.render(t, tc.values)))
			})
		}
	}
}
