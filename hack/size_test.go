package hack

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The style guide keeps production files under maxFileLines and functions
// under maxFuncLines, so a file reads as one concern and a function as one
// step; held here, a change that outgrows them fails in seconds, not in
// review.
const (
	maxFileLines = 300
	maxFuncLines = 60
)

// productionGoFiles are the repository's Go files that ship: not tests, not
// the suites (e2e/) or the harness (hack/), not generated deep copies, not
// testdata nor the hidden directories (.cache holds the tools' sources).
func productionGoFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || rel == "e2e" || rel == "hack") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && !strings.HasPrefix(name, "zz_generated") {
			files = append(files, rel)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// oversized lists, as file:line and the count, the file when it is over
// maxFileLines and every function, declared or literal, over maxFuncLines,
// counted from its func line to its closing brace.
func oversized(fset *token.FileSet, name string, f *ast.File) []string {
	var out []string
	if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
		out = append(out, fmt.Sprintf("%s:1: the file is %d lines, over %d", name, n, maxFileLines))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		var what string
		switch fn := n.(type) {
		case *ast.FuncDecl:
			if fn.Body == nil {
				return true
			}
			what = "func " + fn.Name.Name
		case *ast.FuncLit:
			what = "a function literal"
		default:
			return true
		}
		start, end := fset.Position(n.Pos()), fset.Position(n.End())
		if lines := end.Line - start.Line + 1; lines > maxFuncLines {
			out = append(out, fmt.Sprintf("%s:%d: %s is %d lines, over %d", name, start.Line, what, lines, maxFuncLines))
		}
		return true
	})
	return out
}

func TestNoProductionFileOver300LinesNorFunctionOver60(t *testing.T) {
	files := productionGoFiles(t, "..")
	// The walk found the repository, not an empty tree: a check over no
	// files would pass whatever the code.
	require.Greater(t, len(files), 100, "production Go files found from the repository's root")
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join("..", name), nil, parser.SkipObjectResolution)
		require.NoError(t, err)
		for _, problem := range oversized(fset, name, f) {
			t.Error(problem + ": split it along a seam a reader would look for")
		}
	}
}

// source is a Go file of the given number of lines holding one function
// (a declaration, or a literal) of funcLines lines, func line and closing
// brace included.
func source(funcLines int, literal bool, lines int) string {
	var b strings.Builder
	b.WriteString("package p\n\n")
	if literal {
		b.WriteString("var f = func() {\n")
	} else {
		b.WriteString("func f() {\n")
	}
	for range funcLines - 2 {
		b.WriteString("\t_ = 0\n")
	}
	b.WriteString("}\n")
	for strings.Count(b.String(), "\n") < lines {
		b.WriteString("\n")
	}
	return b.String()
}

func TestOversizedNamesWhatBreaksALimit(t *testing.T) {
	for _, tc := range []struct {
		name      string
		funcLines int
		literal   bool
		lines     int
		want      []string
	}{
		{name: "a function of 60 lines in a file of 300 passes", funcLines: 60, lines: 300},
		{name: "a function of 61 lines fails at its func line",
			funcLines: 61, lines: 100, want: []string{"p.go:3: func f is 61 lines, over 60"}},
		{name: "a function literal of 61 lines fails too",
			funcLines: 61, literal: true, lines: 100, want: []string{"p.go:3: a function literal is 61 lines, over 60"}},
		{name: "a file of 301 lines fails at its first line",
			funcLines: 3, lines: 301, want: []string{"p.go:1: the file is 301 lines, over 300"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, "p.go", source(tc.funcLines, tc.literal, tc.lines), parser.SkipObjectResolution)
			require.NoError(t, err)
			assert.Equal(t, tc.want, oversized(fset, "p.go", f))
		})
	}
}
