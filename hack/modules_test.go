// Package hack holds the checks on the harness itself: what make test
// builds and how.
package hack

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requires reads the versions a go.mod requires, as `go mod edit -json`
// parses them (no network, no module cache).
func requires(t *testing.T, gomod string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "mod", "edit", "-json", gomod).Output()
	require.NoError(t, err, "go mod edit -json %s", gomod)
	var mod struct {
		Require []struct{ Path, Version string }
	}
	require.NoError(t, json.Unmarshal(out, &mod))
	versions := map[string]string{}
	for _, r := range mod.Require {
		versions[r.Path] = r.Version
	}
	return versions
}

// Go's build cache shares a compiled library between two builds only when
// the library and everything under it are at the same versions (with
// -trimpath the cache key names the required version, even of a replaced
// module). runnerguard's own builds and the tools the harness builds from
// source (hack/tools: kube-apiserver, Helm, kwok, Karpenter...) share most
// of Kubernetes' libraries, gRPC and golang.org/x; held at one version each,
// a cold make test compiles them once, not twice. A bump on one side fails
// here until the other follows (docs/development/README.md, Test time).
func TestTheToolsModuleRequiresRunnerguardsVersionsOfWhatTheyShare(t *testing.T) {
	own := requires(t, "../go.mod")
	tools := requires(t, "tools/go.mod")
	shared := 0
	for path, version := range own {
		toolsVersion, ok := tools[path]
		if !ok {
			continue
		}
		shared++
		assert.Equal(t, version, toolsVersion,
			"%s: go.mod requires %s, hack/tools/go.mod %s; give both the higher one (go get in the one, go mod edit -require and go mod tidy in the other)", path, version, toolsVersion)
	}
	// Most of runnerguard's libraries are the tools' too; far fewer would
	// mean a go.mod was not read as one.
	assert.Greater(t, shared, 50, "modules both go.mods require")
}
