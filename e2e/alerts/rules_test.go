package alerts

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The alerts the chart ships, by default all of them.
var shipped = []string{
	"RunnerguardBusyRunnerDeletesRefused",
	"RunnerguardDrainWaiting",
	"RunnerguardFleetOwnerRefused",
	"RunnerguardNoWatcherLeader",
	"RunnerguardRunnerDeaths",
	"RunnerguardRunnersOOMKilled",
	"RunnerguardRunnersStuck",
	"RunnerguardRunnersStalled",
	"RunnerguardRunnersZombie",
	"RunnerguardSwitchedOff",
	"RunnerguardWebhookErrors",
	"RunnerguardWebhookLatency",
}

// The chart's rules, as rendered with their default thresholds, pass
// promtool's checks and the unit tests in testdata/: input series that fire
// each alert and series that must not.
func TestAlertRulesUnderPromtool(t *testing.T) {
	promtool := tool(t, "PROMTOOL")
	pr := rules(t, "")
	assert.ElementsMatch(t, shipped, keys(pr.alerts()))

	dir := t.TempDir()
	raw, err := yaml.Marshal(map[string]any{"groups": pr.Spec.Groups})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), raw, 0o600))
	out, err := run(promtool, "check", "rules", "--lint=all", "--lint-fatal", filepath.Join(dir, "rules.yaml"))
	require.NoError(t, err, "promtool check rules:\n%s", out)

	// promtool reads rule_files relative to each test file.
	tests, err := filepath.Glob("testdata/*.test.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	var args []string
	for _, f := range tests {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		dst := filepath.Join(dir, filepath.Base(f))
		require.NoError(t, os.WriteFile(dst, b, 0o600))
		args = append(args, dst)
	}
	out, err = run(promtool, append([]string{"test", "rules"}, args...)...)
	require.NoError(t, err, "promtool test rules:\n%s", out)
	t.Log(out)
}

// A promtool test that expects no alert passes for a rule that never fires
// (a typo in a metric name, say): every alert needs a test where it fires
// next to the ones where it must not.
func TestEveryAlertHasTestsThatFireAndThatMustNot(t *testing.T) {
	fires, silent := map[string]bool{}, map[string]bool{}
	tests, err := filepath.Glob("testdata/*.test.yaml")
	require.NoError(t, err)
	for _, f := range tests {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var file struct {
			RuleFiles []string `json:"rule_files"`
			Tests     []struct {
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		require.NoError(t, yaml.Unmarshal(raw, &file), f)
		assert.Equal(t, []string{"rules.yaml"}, file.RuleFiles, f)
		for _, tc := range file.Tests {
			for _, a := range tc.AlertRuleTest {
				require.Contains(t, shipped, a.Alertname, f)
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					silent[a.Alertname] = true
				}
			}
		}
	}
	for _, a := range shipped {
		assert.True(t, fires[a], "no test fires %s", a)
		assert.True(t, silent[a], "no test says when %s must not fire", a)
	}
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
