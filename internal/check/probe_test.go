package check

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/runnerguard/runnerguard/internal/fleet/generic"
	"github.com/runnerguard/runnerguard/internal/fleet/gitlab"
	"github.com/runnerguard/runnerguard/internal/presets"
	"github.com/runnerguard/runnerguard/internal/runnerpod"
	"github.com/runnerguard/runnerguard/webhook/inject"
)

func TestRunnerContainersReadsTheChartsCondition(t *testing.T) {
	names, err := RunnerContainers([]admissionregistrationv1.MatchCondition{
		{Name: "runner-pod", Expression: `object.spec.containers.exists(c, c.name in ["job", "build", "runner"])`},
		{Name: "not-mirror-pod", Expression: "!has(object.metadata.annotations)"},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"job", "build", "runner"}, names)
	names, err = RunnerContainers([]admissionregistrationv1.MatchCondition{
		{Name: "runner-pod", Expression: `object.spec.containers.exists(c, (c.name in ["runner"] || c.name.startsWith("step-") || c.name.startsWith("a\"b")))`},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"runner", "step-*", "a\"b*"}, names, "a prefix is read back as the chart was given it")
	assert.Equal(t, "step-probe", ProbePod("ns", "generic", []string{"step-*"}).Spec.Containers[0].Name, "a probe's container has a name the prefix takes")

	_, err = RunnerContainers([]admissionregistrationv1.MatchCondition{{Name: "x", Expression: "true"}})
	assert.ErrorContains(t, err, "no matchCondition names the runner containers")
	_, err = RunnerContainers([]admissionregistrationv1.MatchCondition{{Name: "runner-pod", Expression: "c.name in variables.names"}})
	assert.ErrorContains(t, err, `matchCondition "runner-pod": no list literal`)
}

// Each probe is matched by its own preset when that is on, by generic
// when only that is, and by none otherwise: so the presets the injector's
// answers name are exactly those on.
func TestEachProbeIsMatchedByItsOwnPreset(t *testing.T) {
	var containers []string
	for _, p := range presets.Defaults() {
		containers = append(containers, p.RunnerContainers...)
	}
	for _, shaped := range presets.Order {
		for _, on := range presets.Order {
			ps := presets.Defaults()
			for i := range ps {
				ps[i].Enabled = ps[i].Name == on
			}
			got, ok := presets.Match(ProbePod("ci", shaped, containers), ps)
			switch {
			case on == shaped || on == generic.Name:
				require.True(t, ok, "%s's probe with only %s on", shaped, on)
				assert.Equal(t, on, got.Preset.Name, "%s's probe with only %s on", shaped, on)
			default:
				assert.False(t, ok, "%s's probe is no %s runner pod", shaped, on)
			}
		}
	}
}

func TestInjectedPresetNeedsTheInjectorsMarks(t *testing.T) {
	pod := ProbePod("ci", gitlab.Name, []string{"build"})
	assert.Equal(t, runnerpod.PresetName(""), InjectedPreset(pod), "as sent")
	assert.Equal(t, runnerpod.PresetName(""), InjectedPreset(nil))
	pod.Labels = map[string]string{runnerpod.RunnerLabel: "true"}
	pod.Annotations = map[string]string{runnerpod.PresetAnnotation: "gitlab"}
	assert.Equal(t, gitlab.Name, InjectedPreset(pod))
}

func TestFailed(t *testing.T) {
	for msg, want := range map[string]Outcome{
		`Internal error occurred: failed calling webhook "eviction.guard.runnerguard.io": failed to call webhook: Post "https://127.0.0.1:4/validate-runner-pod?timeout=5s": dial tcp 127.0.0.1:4: connect: connection refused`: Unreachable,
		`Internal error occurred: failed calling webhook "inject.runnerguard.io": failed to call webhook: Post "https://x/mutate-runner-pod?timeout=5s": context deadline exceeded`:                                             TimedOut,
		`Timeout: failed calling webhook "eviction.guard.runnerguard.io": failed to call webhook: Post "https://runnerguard.runnerguard.svc:443/validate-runner-pod?timeout=5s": net/http: request canceled`:                    TimedOut,
		`pods "x" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "runnerguard-cgroup")`:                                                                                                         Refused,
	} {
		assert.Equal(t, want, Failed(msg), msg)
	}
}

func TestRefusalDetailNamesTheInjectorsVolumes(t *testing.T) {
	assert.Equal(t, inject.CgroupVolume, cgroupVolume)
	assert.Equal(t, inject.VitalsVolume, vitalsVolume)
	assert.Contains(t, RefusalDetail(`violates PodSecurity "baseline:latest": hostPath volumes (volume "runnerguard-cgroup")`), "the injector answered, and the namespace refuses what it adds")
	assert.Equal(t, "quota exceeded", RefusalDetail("quota exceeded"))
}

func TestEvictsAndInjectsReadTheRules(t *testing.T) {
	rule := func(res string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, Resources: []string{res}}}}
	}
	assert.True(t, Evicts(admissionregistrationv1.ValidatingWebhook{Rules: rule("pods/eviction", admissionregistrationv1.Create)}))
	assert.False(t, Evicts(admissionregistrationv1.ValidatingWebhook{Rules: rule("pods", admissionregistrationv1.Delete)}))
	assert.True(t, Injects(admissionregistrationv1.MutatingWebhook{Rules: rule("pods", admissionregistrationv1.OperationAll)}))
	assert.False(t, Injects(admissionregistrationv1.MutatingWebhook{Rules: rule("pods/eviction", admissionregistrationv1.Create)}))
}

func TestReady(t *testing.T) {
	crt := func(generation int64, conds ...map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetGeneration(generation)
		var list []any
		for _, c := range conds {
			list = append(list, c)
		}
		_ = unstructured.SetNestedSlice(u.Object, list, "status", "conditions")
		return u
	}
	for name, tc := range map[string]struct {
		crt     *unstructured.Unstructured
		ready   bool
		problem string
	}{
		"a Ready certificate is ready": {
			crt: crt(1, map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(1)}), ready: true,
		},
		"a certificate not ready says cert-manager's reason and message": {
			crt:     crt(2, map[string]any{"type": "Ready", "status": "False", "reason": "IncorrectIssuer", "message": "Issuer of the certificate is not up to date", "observedGeneration": int64(2)}),
			problem: "IncorrectIssuer: Issuer of the certificate is not up to date",
		},
		"a Ready condition of an older spec is not ready yet": {
			crt:     crt(3, map[string]any{"type": "Ready", "status": "True", "observedGeneration": int64(2)}),
			problem: "cert-manager has not yet seen its spec's generation 3",
		},
		"a certificate without conditions is not issued yet": {
			crt:     crt(1),
			problem: "no Ready condition yet (cert-manager has not issued it)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			ready, problem := Ready(tc.crt)
			assert.Equal(t, tc.ready, ready)
			assert.Equal(t, tc.problem, problem)
		})
	}
}
