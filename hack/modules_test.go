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
		Replace []struct {
			Old, New struct{ Path, Version string }
		}
	}
	require.NoError(t, json.Unmarshal(out, &mod))
	versions := map[string]string{}
	for _, r := range mod.Require {
		versions[r.Path] = r.Version
	}
	// A module replaced by a version of itself (hack/tools requires
	// Kubernetes' staging modules as v0.0.0) builds as that version.
	for _, r := range mod.Replace {
		if _, ok := versions[r.Old.Path]; ok && r.New.Path == r.Old.Path && r.New.Version != "" {
			versions[r.Old.Path] = r.New.Version
		}
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

// The harness's other modules that make test builds (cert-manager's
// controllers for the node, the alerts' tests beside promtool) follow the
// same rule, so their Kubernetes, gRPC and golang.org/x compile once too.
// Where the module needs a newer version than runnerguard's (its own
// requirement, which MVS cannot lower), it is named here with why.
func TestTheHarnessModulesRequireRunnerguardsVersionsOfWhatTheyShare(t *testing.T) {
	want := requires(t, "tools/go.mod")
	for path, version := range requires(t, "../go.mod") {
		want[path] = version
	}
	newer := map[string]string{
		// cert-manager 1.21 requires it; Kubernetes 1.37.2 the one before.
		// Only the CEL libraries and the apiserver packages over them
		// compile twice.
		"github.com/google/cel-go": "e2e/certmanager",
	}
	for _, gomod := range []string{"../e2e/certmanager/go.mod", "../e2e/alerts/go.mod"} {
		shared := 0
		for path, version := range requires(t, gomod) {
			w, ok := want[path]
			if !ok {
				continue
			}
			shared++
			if m, ok := newer[path]; ok && "../"+m+"/go.mod" == gomod {
				continue
			}
			assert.Equal(t, w, version,
				"%s: %s requires %s, runnerguard's modules %s; give it theirs (go mod edit -require and go mod tidy there), or name why it cannot", path, gomod, version, w)
		}
		assert.Greater(t, shared, 10, "modules %s shares", gomod)
	}
}
