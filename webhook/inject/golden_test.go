package inject

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/runnerguard/runnerguard/internal/config/configtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden.yaml from the current output")

// Golden is the content of a testdata/<name>.golden.yaml file: what Mutate
// did with testdata/<name>.pod.yaml.
type Golden struct {
	Result   Result     `json:"result"`
	Warnings []string   `json:"warnings,omitempty"`
	Pod      corev1.Pod `json:"pod"`
}

// goldenRequester is the requester of every golden input's CREATE.
const goldenRequester = "system:serviceaccount:ci:runner-manager"

// goldenFacts are the facts of the inputs that need more than a requester.
var goldenFacts = map[string]Facts{
	"psa-restricted": {
		Requester:        goldenRequester,
		HostMountRefused: HostMountRefusal("restricted", map[string]string{psaEnforceLabel: "restricted"}, ""),
	},
}

// goldenInputs returns the names of testdata/*.pod.yaml.
func goldenInputs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/*.pod.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = strings.TrimSuffix(filepath.Base(f), ".pod.yaml")
	}
	return names
}

func readPod(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name+".pod.yaml"))
	require.NoError(t, err)
	pod := &corev1.Pod{}
	require.NoError(t, yaml.UnmarshalStrict(raw, pod))
	return pod
}

func factsFor(name string) Facts {
	if f, ok := goldenFacts[name]; ok {
		return f
	}
	return Facts{Requester: goldenRequester}
}

func TestGolden(t *testing.T) {
	cfg := configtest.Enforcing()
	for _, name := range goldenInputs(t) {
		t.Run(name, func(t *testing.T) {
			pod := readPod(t, name)
			out := Mutate(pod, factsFor(name), cfg)
			got := Golden{Result: out.Result, Warnings: out.Warnings, Pod: *pod}
			path := filepath.Join("testdata", name+".golden.yaml")
			if *update {
				raw, err := yaml.Marshal(got)
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(path, raw, 0o644))
			}
			raw, err := os.ReadFile(path)
			require.NoError(t, err, "no golden file: run go test ./webhook/inject -run TestGolden -update")
			var want Golden
			require.NoError(t, yaml.UnmarshalStrict(raw, &want))
			assert.Equal(t, want, got)
		})
	}
}

func TestGoldenFilesHaveInputs(t *testing.T) {
	inputs := goldenInputs(t)
	goldens, err := filepath.Glob("testdata/*.golden.yaml")
	require.NoError(t, err)
	for _, g := range goldens {
		name := strings.TrimSuffix(filepath.Base(g), ".golden.yaml")
		assert.Contains(t, inputs, name, "orphaned golden file %s: delete it or restore its input", g)
	}
	for name := range goldenFacts {
		assert.True(t, slices.Contains(inputs, name), "goldenFacts names %q, which has no input", name)
	}
}

func TestMutateTwiceChangesNothingMore(t *testing.T) {
	cfg := configtest.Enforcing()
	for _, name := range goldenInputs(t) {
		t.Run(name, func(t *testing.T) {
			once := readPod(t, name)
			first := Mutate(once, factsFor(name), cfg)
			twice := once.DeepCopy()
			second := Mutate(twice, factsFor(name), cfg)
			assert.Equal(t, once, twice)
			assert.Equal(t, first, second)
		})
	}
}
