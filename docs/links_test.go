// Package docs holds no code: its test keeps the Markdown's relative links
// and their anchors leading somewhere, as pages move.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

var (
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	code     = regexp.MustCompile("`[^`\n]*`")
	heading  = regexp.MustCompile(`^#{1,6}\s+(.*)$`)
	notInTag = regexp.MustCompile(`[^\p{L}\p{N}_\- ]`)
	scheme   = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)
)

// markdown lists the repository's Markdown files, skipping hidden
// directories (caches, artifacts, git).
func markdown(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// prose is the file's lines outside fenced blocks.
func prose(text string) []string {
	var lines []string
	fenced := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			lines = append(lines, l)
		}
	}
	return lines
}

// anchors are the headings' anchors as GitHub renders them.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range prose(text) {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := strings.ReplaceAll(notInTag.ReplaceAllString(strings.ToLower(strings.TrimSpace(m[1])), ""), " ", "-")
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func TestEveryRelativeLinkInTheMarkdownLeadsToAFileAndItsHeading(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]string{}
	read := func(path string) (string, bool) {
		if s, ok := texts[path]; ok {
			return s, true
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", false
		}
		texts[path] = string(b)
		return texts[path], true
	}
	for _, file := range markdown(t, root) {
		text, _ := read(file)
		rel, _ := filepath.Rel(root, file)
		for _, line := range prose(text) {
			// A link inside a code span is text, not a link.
			for _, m := range link.FindAllStringSubmatch(code.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if scheme.MatchString(target) {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: %s leads to no file", rel, target)
					continue
				}
				if anchor == "" || !strings.HasSuffix(dest, ".md") {
					continue
				}
				if s, _ := read(dest); !anchors(s)[anchor] {
					t.Errorf("%s: %s names no heading of %s", rel, target, filepath.Base(dest))
				}
			}
		}
	}
}
