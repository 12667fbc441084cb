package chart_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// manifestsFile is the chart rendered with defaults for users who apply
// plain YAML; `make manifests` writes it with the same command.
const manifestsFile = "../../manifests/runnerguard.yaml"

func TestManifestsAreInSyncWithTheChart(t *testing.T) {
	h := helm4(t)
	want, err := h.template(t)
	require.NoError(t, err)
	got, err := os.ReadFile(manifestsFile)
	require.NoError(t, err)
	assert.Equal(t, want, string(got), "manifests/runnerguard.yaml is stale: run `make manifests`")
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
