package chart_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The plain YAML for users who apply it, in both shapes: the chart's
// defaults (warn) and enforce (its values file); `make manifests` writes
// them with the same commands.
const (
	manifestsFile        = "../../manifests/runnerguard.yaml"
	enforceManifestsFile = "../../manifests/runnerguard-enforce.yaml"
	enforceValuesFile    = "../../manifests/enforce.values.yaml"
)

func TestManifestsAreInSyncWithTheChart(t *testing.T) {
	h := helm4(t)
	enforceValues, err := os.ReadFile(enforceValuesFile)
	require.NoError(t, err)
	for _, tc := range []struct{ file, values string }{{manifestsFile, ""}, {enforceManifestsFile, string(enforceValues)}} {
		var values []string
		if tc.values != "" {
			values = append(values, tc.values)
		}
		want, err := h.template(t, values...)
		require.NoError(t, err)
		got, err := os.ReadFile(tc.file)
		require.NoError(t, err)
		assert.Equal(t, want, string(got), "%s is stale: run `make manifests`", tc.file)
	}
	warn, err := os.ReadFile(manifestsFile)
	require.NoError(t, err)
	enforce, err := os.ReadFile(enforceManifestsFile)
	require.NoError(t, err)
	unlabelledTo := func(not string) *regexp.Regexp {
		return regexp.MustCompile(`key: runnerguard\.io/mode\s+operator: NotIn\s+values:\s+- ` + not + `\s`)
	}
	assert.Regexp(t, unlabelledTo("enforce"), string(warn), "the plain YAML sends unlabelled namespaces to the warn registrations")
	assert.NotRegexp(t, unlabelledTo("warn"), string(warn))
	assert.Regexp(t, unlabelledTo("warn"), string(enforce), "the enforce YAML sends them to the enforce ones")
	assert.NotRegexp(t, unlabelledTo("enforce"), string(enforce))
}

// Helm 3 and Helm 4 must install the same objects (they order kinds they do
// not know differently).
func TestHelm3AndHelm4RenderTheSame(t *testing.T) {
	hs := helms(t)
	h4, err := hs[0].template(t)
	require.NoError(t, err)
	h3, err := hs[1].template(t)
	require.NoError(t, err)
	assert.ElementsMatch(t, parse(t, h4), parse(t, h3))
}
