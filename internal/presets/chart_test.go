package presets_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/runnerguard/runnerguard/internal/presets"
)

var update = flag.Bool("update", false, "rewrite the chart's fleet table")

// The chart's fleet table is the one generated from the fleets' list:
// a fleet added or changed in Go without `make fleet-table` fails here,
// in seconds.
func TestTheChartsFleetTableIsGeneratedFromTheFleets(t *testing.T) {
	want, err := presets.ChartTable()
	require.NoError(t, err)
	path := filepath.Join("..", "..", presets.ChartTablePath)
	if *update {
		require.NoError(t, os.WriteFile(path, want, 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "%s is stale: run make fleet-table", presets.ChartTablePath)
}

// The schema's fleet list is Order: a fleet added in Go is a name the
// values may take, after `make fleet-table`.
func TestTheSchemasFleetListIsTheFleets(t *testing.T) {
	path := filepath.Join("..", "..", presets.SchemaPath)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	want, err := presets.SchemaNames(got)
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(path, want, 0o644))
		got = want
	}
	assert.Equal(t, string(want), string(got), "%s is stale: run make fleet-table", presets.SchemaPath)
}
