package docs_test

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// userFacingBytes bounds what a user reads: every file under docs/ (pages,
// pictures, example files) but the development docs, the dated measurement
// logs and this package's tests, so the docs grow by replacing: depth goes
// to docs/development.
const userFacingBytes = 160_000

// notUserFacing are the folders under docs/ the bound leaves out.
var notUserFacing = map[string]bool{
	"development":      true,
	"performance/logs": true,
}

func TestUserFacingDocsStayWithinTheirBound(t *testing.T) {
	total := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if notUserFacing[filepath.ToSlash(path)] {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		info, err := d.Info()
		require.NoError(t, err)
		total += int(info.Size())
		return nil
	})
	require.NoError(t, err)
	assert.LessOrEqual(t, total, userFacingBytes, "user-facing docs are %d bytes: move depth to docs/development, or cut", total)
}
