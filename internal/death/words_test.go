package death

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every class class.go declares has its words, and only those: a class
// added without them would reach a commit as "Runner died: <name>" and the
// CLI with no meaning.
func TestEveryClassHasItsWords(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "class.go", nil, 0)
	require.NoError(t, err)
	var declared []Class
	ast.Inspect(f, func(n ast.Node) bool {
		v, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if id, typed := v.Type.(*ast.Ident); typed && id.Name == "Class" {
			for _, val := range v.Values {
				s, err := strconv.Unquote(val.(*ast.BasicLit).Value)
				require.NoError(t, err)
				declared = append(declared, Class(s))
			}
		}
		return false
	})
	require.NotEmpty(t, declared)
	assert.ElementsMatch(t, declared, Classes())
	for _, c := range Classes() {
		assert.NotEmpty(t, c.Meaning(), c)
		// A death that is told has a title or a rule for one (an error
		// exit's code); an untold one has no title to show.
		if c.Told() && c != ErrorExit && c != JobFailed {
			assert.NotEmpty(t, c.Title(), c)
		}
		if !c.Told() {
			assert.Empty(t, c.Title(), c)
		}
	}
	assert.True(t, Class("from-a-newer-build").Told(), "a class this build does not know is told")
}
