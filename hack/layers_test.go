package hack

import (
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/runnerguard/runnerguard/"

// The layers point one way: nothing under internal/ imports webhook/ (the
// webhooks are built on internal/, never the reverse), and a fleet's
// package is named only by the fleet list (internal/presets), by the
// fleets themselves and by test builders, so that every other room asks
// the fleet interface and never branches on a fleet.
func TestLayersPointOneWay(t *testing.T) {
	root := ".."
	fset := token.NewFileSet()
	var back, fleets []string
	for _, rel := range productionGoFiles(t, root) {
		f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.ImportsOnly)
		require.NoError(t, err)
		dir := path.Dir(rel)
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			target, ours := strings.CutPrefix(p, module)
			if !ours {
				continue
			}
			if strings.HasPrefix(dir, "internal/") && strings.HasPrefix(target, "webhook/") {
				back = append(back, rel+" imports "+target)
			}
			if isFleet(target) && !mayNameFleets(dir) {
				fleets = append(fleets, rel+" imports "+target)
			}
		}
	}
	assert.Empty(t, back, "internal/ must not import webhook/: move what both need down into internal/")
	assert.Empty(t, fleets, "only internal/presets names a fleet's package: ask the fleet interface (presets.For, presets.Of) instead")
}

// isFleet: a fleet's own package, internal/fleet/<name>.
func isFleet(p string) bool {
	rest, ok := strings.CutPrefix(p, "internal/fleet/")
	return ok && rest != "" && !strings.Contains(rest, "/")
}

// mayNameFleets: the list, the fleets and test builders (a package named
// *test).
func mayNameFleets(dir string) bool {
	return dir == "internal/presets" || strings.HasPrefix(dir, "internal/fleet/") || strings.HasSuffix(dir, "test")
}
