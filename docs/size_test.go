package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// userFacingBytes bounds the pages a user reads (install, concepts,
// operations and the top-level pages), so the docs grow by replacing:
// depth goes to docs/development.
const userFacingBytes = 160_000

func TestUserFacingDocsStayWithinTheirBound(t *testing.T) {
	total := 0
	for _, root := range []string{"install", "concepts", "operations", "."} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != root {
				if root == "." {
					return fs.SkipDir // the top-level pages only
				}
				return nil
			}
			if strings.HasSuffix(path, ".md") {
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				total += len(b)
			}
			return nil
		})
		require.NoError(t, err)
	}
	assert.LessOrEqual(t, total, userFacingBytes, "user-facing docs are %d bytes: move depth to docs/development, or cut", total)
}
