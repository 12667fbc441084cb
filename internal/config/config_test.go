package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/internal/fleet"
	"github.com/runnerguard/runnerguard/internal/fleet/arcworkflow"
	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
)

func TestDefaultIsValid(t *testing.T) {
	require.NoError(t, Default().Validate())
	assert.Empty(t, Default().RunnerContainerNames(), "no fleet is chosen by default")
	all := Default()
	for i := range all.Presets {
		all.Presets[i].Enabled = true
	}
	require.NoError(t, all.Validate())
	var want []string
	for _, p := range presets.Defaults() {
		for _, n := range p.RunnerContainers {
			if !slices.Contains(want, n) {
				want = append(want, n)
			}
		}
	}
	assert.Equal(t, want, all.RunnerContainerNames(), "every fleet's, first seen first, in match order")
}

func TestParse(t *testing.T) {
	cases := []struct {
		name    string
		yaml    string
		wantErr []string
		check   func(t *testing.T, c Config)
	}{
		{name: "an empty file gives the defaults", yaml: "",
			check: func(t *testing.T, c Config) { assert.Equal(t, Default(), c) }},
		{name: "a listed preset replaces its default and keeps the others", yaml: `
presets:
- name: generic
  enabled: true
  runnerContainers: [runner, worker]
`, check: func(t *testing.T, c Config) {
			require.Len(t, c.Presets, len(presets.All))
			assert.Equal(t, generic.Name, c.Presets[len(c.Presets)-1].Name, "match order is kept")
			assert.Equal(t, []string{"runner", "worker"}, preset(c, generic.Name).RunnerContainers)
			assert.Empty(t, preset(c, generic.Name).DiagnosticEnv, "replaced whole")
			assert.Equal(t, []string{"runner", "worker"}, c.RunnerContainerNames(), "the other presets stay off, as by default")
		}},
		{name: "presets in any order are matched most specific first", yaml: `
presets:
- {name: generic, enabled: true, runnerContainers: [runner]}
- {name: arc-workflow, enabled: false, runnerContainers: [job]}
`, check: func(t *testing.T, c Config) {
			assert.Equal(t, arcworkflow.Name, c.Presets[0].Name)
			assert.Equal(t, []string{"runner"}, c.RunnerContainerNames())
		}},
		{name: "the interval and principals are read", yaml: `
presets: [{name: gitlab, enabled: true, runnerContainers: [build], ownerPrincipals: [b], maxProtected: 2h}]
guard: {exemptPrincipals: [a]}
inject: {vitals: {enabled: true, image: x, interval: 2s, cgroupHostPath: /sys/fs/cgroup, mountPath: /v}}
`, check: func(t *testing.T, c Config) {
			assert.Equal(t, 2*time.Second, c.Inject.Vitals.Interval.Duration)
			assert.Equal(t, []string{"a"}, c.Guard.ExemptPrincipals)
			assert.Equal(t, []string{"b"}, preset(c, gitlab.Name).OwnerPrincipals)
			assert.Equal(t, 2*time.Hour, preset(c, gitlab.Name).MaxProtected.Duration)
		}},
		{name: "a listed preset without a cap gets its fleet's default", yaml: "presets: [{name: gitlab, enabled: true, runnerContainers: [build]}]",
			check: func(t *testing.T, c Config) {
				assert.Equal(t, 744*time.Hour, preset(c, gitlab.Name).MaxProtected.Duration, "GitLab: under one month")
				assert.Equal(t, 120*time.Hour, preset(c, arcworkflow.Name).MaxProtected.Duration, "GitHub: 5 days per job")
				assert.Equal(t, 168*time.Hour, preset(c, generic.Name).MaxProtected.Duration, "GitHub: 5 days, plus up to 2 days queued")
			}},
		{name: "a home-grown pool names the labels and annotations of its job, and gitlab keeps its own when left out", yaml: `
presets:
- {name: generic, enabled: true, runnerContainers: [runner], job: {id: {label: ci.example.com/job-id}, url: {annotation: ci.example.com/job-url}}}
- {name: gitlab, enabled: true, runnerContainers: [build]}
`, check: func(t *testing.T, c Config) {
			assert.Equal(t, runnerpod.JobKeys{ID: runnerpod.PodKey{Label: "ci.example.com/job-id"}, URL: runnerpod.PodKey{Annotation: "ci.example.com/job-url"}}, preset(c, generic.Name).Job)
			assert.Equal(t, gitlab.Fleet{}.Defaults().Job, preset(c, gitlab.Name).Job)
		}},
		{name: "a job key names a label or an annotation, not both, by a valid key", yaml: `
presets:
- {name: generic, enabled: true, runnerContainers: [runner], job: {id: {label: a, annotation: b}, name: {label: "not a key!"}}}
`, wantErr: []string{"presets[generic].job.id: name one of a label, an annotation or an env var", `presets[generic].job.name: "not a key!"`}},
		{name: "the global owner principals were removed", yaml: "guard: {ownerPrincipals: [b]}", wantErr: []string{"guard.ownerPrincipals was removed: set presets[].ownerPrincipals"}},
		{name: "only presets whose owner ends the job take owners, and caps have a floor", yaml: `presets: [{name: generic, enabled: true, runnerContainers: [runner], ownerPrincipals: [x], maxProtected: 10s}, {name: gitlab, enabled: true, runnerContainers: [build], ownerPrincipals: [""]}]`,
			wantErr: []string{"presets[generic].ownerPrincipals: only the presets", "presets[generic].maxProtected: 10s is below the 1m floor", "presets[gitlab].ownerPrincipals: principals must not be empty"}},
		{name: "gitlab may take an owner of the build pods' own namespace, by an explicit opt-in", yaml: `presets: [{name: gitlab, enabled: true, runnerContainers: [build], ownerPrincipals: [system:serviceaccount:ci:gitlab-runner], ownerInRunnerNamespace: true}]`,
			check: func(t *testing.T, c Config) {
				assert.True(t, preset(c, gitlab.Name).OwnerInRunnerNamespace)
				assert.False(t, preset(Default(), gitlab.Name).OwnerInRunnerNamespace, "off by default: edit in the runner namespace could wear the owner")
			}},
		{name: "only gitlab takes ownerInRunnerNamespace: arc-workflow's runner proves itself by its pod's token", yaml: `presets: [{name: arc-workflow, enabled: true, runnerContainers: [job], ownerInRunnerNamespace: true}, {name: generic, enabled: true, runnerContainers: [runner], ownerInRunnerNamespace: true}]`,
			wantErr: []string{"presets[arc-workflow].ownerInRunnerNamespace: only the presets whose job's owner may run in the runner namespace (" + ownerPresets(func(o fleet.Owner) bool { return o.InRunnerNamespace }) + ") take it", "presets[generic].ownerInRunnerNamespace: only the presets"}},
		{name: "the policy's trusted principals are read, and empty ones refused", yaml: `
presets:
- {name: arc-legacy, enabled: true, runnerContainers: [runner], controllerPrincipals: [legacy, ""]}
policy: {garbageCollectors: [kcm]}
`, wantErr: []string{"principals must not be empty"}},
		{name: "a preset listed without controllers trusts none, and the garbage collector stays by default", yaml: `
presets:
- {name: arc-legacy, enabled: true, runnerContainers: [runner]}
`, check: func(t *testing.T, c Config) {
			assert.Empty(t, c.Presets[3].ControllerPrincipals, "replaced whole")
			assert.Equal(t, []string{GarbageCollector}, c.Policy.GarbageCollectors)
		}},
		{name: "a map the file sets replaces the default whole", yaml: `
inject:
  podAnnotations: {}
  vitals: {enabled: true, image: x, interval: 5s, cgroupHostPath: /sys/fs/cgroup, mountPath: /v, resources: {requests: {memory: 8Mi}}}
`, check: func(t *testing.T, c Config) {
			assert.Empty(t, c.Inject.PodAnnotations, "the file's empty map")
			assert.Empty(t, c.Inject.Vitals.Resources.Limits, "a default limit can be dropped")
			assert.Equal(t, "8Mi", c.Inject.Vitals.Resources.Requests.Memory().String())
		}},
		{name: "maps the file leaves out keep their defaults", yaml: "inject: {terminationMessagePolicy: false}",
			check: func(t *testing.T, c Config) {
				assert.Equal(t, Default().Inject.PodAnnotations, c.Inject.PodAnnotations)
				assert.Equal(t, Default().Inject.Vitals.Resources, c.Inject.Vitals.Resources)
			}},
		{name: "the marks and budgets are on by default, Karpenter's duration form off, and each can be turned off", yaml: "marks: {karpenter: false}",
			check: func(t *testing.T, c Config) {
				assert.Equal(t, Marks{Karpenter: false, ClusterAutoscaler: true, Budgets: true}, c.Marks)
				assert.Equal(t, Marks{Karpenter: true, ClusterAutoscaler: true, Budgets: true}, Default().Marks)
			}},
		{name: "the injector does not write a mark the leader keeps, nor its ownership", yaml: `
inject: {podAnnotations: {karpenter.sh/do-not-disrupt: "true", cluster-autoscaler.kubernetes.io/safe-to-evict: "false", runnerguard.io/marked: x}}
marks: {clusterAutoscaler: false}
`, wantErr: []string{`"karpenter.sh/do-not-disrupt" is the leader's to write`, `"runnerguard.io/marked" is the leader's to write`}},
		{name: "a mark turned off can be written by the injector, as before", yaml: `
inject: {podAnnotations: {karpenter.sh/do-not-disrupt: "true"}}
marks: {karpenter: false}
`, check: func(t *testing.T, c Config) {
			assert.Equal(t, map[string]string{"karpenter.sh/do-not-disrupt": "true"}, c.Inject.PodAnnotations)
		}},
		{name: "a typo'd key is an error", yaml: "gaurd: {}", wantErr: []string{`unknown field "gaurd"`}},
		{name: "zombies: a negative grace and an empty reaper are errors", yaml: "guard: {endZombiesAfter: -1h, zombieReapers: [\"\"]}",
			wantErr: []string{"guard.endZombiesAfter: -1h0m0s is negative", "guard.zombieReapers: principals must not be empty"}},
		{name: "an unknown preset is an error", yaml: "presets: [{name: drone, enabled: true, runnerContainers: [x]}]", wantErr: []string{`unknown preset "drone"`}},
		{name: "a preset listed twice is an error", yaml: "presets: [{name: generic, enabled: true, runnerContainers: [x]}, {name: generic, enabled: true, runnerContainers: [y]}]", wantErr: []string{`"generic" listed twice`}},
		{name: "an enabled preset needs containers", yaml: "presets: [{name: gitlab, enabled: true}]", wantErr: []string{"presets[gitlab].runnerContainers: must name at least one"}},
		{name: "container names must be DNS labels", yaml: "presets: [{name: gitlab, enabled: true, runnerContainers: [Build_1]}]", wantErr: []string{`"Build_1"`}},
		{name: "env names must be valid and literal", yaml: `presets: [{name: generic, enabled: true, runnerContainers: [runner], diagnosticEnv: [{name: "1X", value: a}, {name: MY_VAR, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]}]`,
			wantErr: []string{`diagnosticEnv: "1X"`, `"MY_VAR": only literal values`}},
		{name: "every problem is reported at once", yaml: `
presets: [{name: a-b, enabled: true, runnerContainers: [x]}]
guard: {exemptPrincipals: [""]}
inject: {vitals: {enabled: true, image: "", interval: 10ms, cgroupHostPath: rel, mountPath: ""}}
`, wantErr: []string{"unknown preset", "principals must not be empty", "image: required", "below the 100ms floor", `cgroupHostPath: "rel"`, `mountPath: ""`}},
		{name: "a Pod Security default is one of the three levels", yaml: "inject: {podSecurityDefault: baseline}",
			check: func(t *testing.T, c Config) { assert.Equal(t, PodSecurityBaseline, c.Inject.PodSecurityDefault) }},
		{name: "an unknown Pod Security default is an error", yaml: "inject: {podSecurityDefault: Restricted}",
			wantErr: []string{`inject.podSecurityDefault: "Restricted" is not a Pod Security level`}},
		{name: "a probe port a non-root sidecar cannot bind is an error", yaml: "inject: {vitals: {probePort: 80}}",
			wantErr: []string{"inject.vitals.probePort: 80 is neither 0 (no probe) nor a port from 1024 to 65535"}},
		{name: "probe port 0 turns the probe off", yaml: "inject: {vitals: {probePort: 0}}",
			check: func(t *testing.T, c Config) { assert.Zero(t, c.Inject.Vitals.ProbePort) }},
		{name: "a sidecar request above its limit is an error", yaml: "inject: {vitals: {resources: {requests: {cpu: 100m}, limits: {cpu: 50m}}}}",
			wantErr: []string{"inject.vitals.resources.requests.cpu: 100m is above its limit 50m"}},
		{name: "all presets disabled is valid: the webhooks act on no pod, as a plain install does", yaml: `presets: [{name: arc-workflow}, {name: gitlab}, {name: arc-scale-set}, {name: arc-legacy}, {name: generic}]`,
			check: func(t *testing.T, c Config) { assert.Empty(t, c.RunnerContainerNames()) }},
		{name: "by default no preset is on and the guard warns", yaml: "",
			check: func(t *testing.T, c Config) {
				assert.Empty(t, c.RunnerContainerNames())
				assert.Equal(t, ModeWarn, c.Guard.Mode)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if len(tc.wantErr) > 0 {
				require.Error(t, err)
				for _, w := range tc.wantErr {
					assert.Contains(t, err.Error(), w)
				}
				return
			}
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func TestLoadReportsAMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// preset is c's preset of that name.
func preset(c Config, name runnerpod.PresetName) runnerpod.Preset {
	i := slices.IndexFunc(c.Presets, func(p runnerpod.Preset) bool { return p.Name == name })
	if i < 0 {
		return runnerpod.Preset{}
	}
	return c.Presets[i]
}
