package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// chartValues is the chart's values.yaml, the defaults an install runs with.
const chartValues = "../../charts/runnerguard/values.yaml"

// The chart passes these flags from its values, so each default is written
// twice: in the flag and in values.yaml. An install and a bare `serve` must
// run with the same limits, so the two are held equal here, each value read
// the way the flag reads it (10m and 10m0s are the same duration).
func TestTheChartsDefaultsAreTheFlagsDefaults(t *testing.T) {
	raw, err := os.ReadFile(chartValues)
	require.NoError(t, err)
	var values map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &values))

	defaults := serveFlags()
	for value, flag := range map[string]string{
		"webhook.maxConnectionsPerSource": "max-connections-per-source",
		"webhook.maxConnections":          "max-connections",
		"watcher.stuckAfter":              "stuck-after",
		"reports.jobOver.interval":        "job-over-interval",
		"reports.jobOver.grace":           "job-over-grace",
		"metrics.secure":                  "metrics-secure",
	} {
		t.Run(value, func(t *testing.T) {
			v, ok := lookup(values, value)
			require.True(t, ok, "values.yaml has no %s", value)
			want := defaults.Lookup(flag)
			require.NotNil(t, want, "serve has no --%s", flag)
			fromChart := serveFlags()
			require.NoError(t, fromChart.Set(flag, yamlScalar(t, v)), "--%s does not take the chart's %s", flag, value)
			assert.Equal(t, want.DefValue, fromChart.Lookup(flag).Value.String(), "the chart's %s and the default of --%s", value, flag)
		})
	}
}

// serveFlags is a fresh copy of serve's flags at their defaults.
func serveFlags() *pflag.FlagSet {
	var o serveOptions
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	o.bind(fs)
	return fs
}

// lookup reads a dotted path of nested maps.
func lookup(values map[string]any, path string) (any, bool) {
	var v any = values
	for _, key := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[key]; !ok {
			return nil, false
		}
	}
	return v, true
}

// yamlScalar is a scalar value as the chart's template prints it into an
// argument.
func yamlScalar(t *testing.T, v any) string {
	t.Helper()
	raw, err := yaml.Marshal(v)
	require.NoError(t, err)
	return strings.TrimSpace(string(raw))
}
