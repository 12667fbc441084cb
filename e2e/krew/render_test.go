//go:build krew

package krew

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/yaml"
)

// notBuilt stands for the sha256 of an asset a partial build did not make.
const notBuilt = "not-built"

// plugin is what the test reads of a krew Plugin manifest.
type plugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
		} `json:"platforms"`
	} `json:"spec"`
}

// render executes the template the way krew-release-bot does
// (rajatjindal/krew-release-bot pkg/source/template.go, RenderTemplate):
// addURIAndSha renders its URI as a template of its own with TagName and
// Version, hashes the asset there and returns "uri: U\n    sha256: S" (the
// second line indented for a 4-space manifest); indent N re-indents that for
// another depth. The asset is read from dir, named by the URI's last element,
// instead of downloaded; where only some platforms were built (partial), an
// asset the build did not make gets notBuilt for its sha256.
func render(t *testing.T, file, tag, dir string, partial bool) plugin {
	t.Helper()
	version := regexp.MustCompile(`\d+(\.\d+)+`).FindString(tag)
	funcs := template.FuncMap{
		"addURIAndSha": func(uri, tag string) (string, error) {
			var u bytes.Buffer
			if err := template.Must(template.New("uri").Parse(uri)).Execute(&u,
				struct{ TagName, Version string }{tag, version}); err != nil {
				return "", err
			}
			b, err := os.ReadFile(filepath.Join(dir, path.Base(u.String())))
			if partial && os.IsNotExist(err) {
				return fmt.Sprintf("uri: %s\n    sha256: %s", u.String(), notBuilt), nil
			}
			if err != nil {
				return "", fmt.Errorf("the template names an asset the build did not make: %w", err)
			}
			sum := sha256.Sum256(b)
			return fmt.Sprintf("uri: %s\n    sha256: %s", u.String(), hex.EncodeToString(sum[:])), nil
		},
		"indent": func(n int, v string) string {
			v = strings.ReplaceAll(v, "    sha256:", "sha256:")
			pad := strings.Repeat(" ", n)
			return strings.TrimSpace(pad + strings.ReplaceAll(v, "\n", "\n"+pad))
		},
	}
	tmpl, err := template.New(filepath.Base(file)).Funcs(funcs).ParseFiles(file)
	if err != nil {
		t.Fatalf("parse %s: %v", file, err)
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, struct{ TagName string }{tag}); err != nil {
		t.Fatalf("render %s: %v", file, err)
	}
	var p plugin
	if err := yaml.UnmarshalStrict(out.Bytes(), &p); err != nil {
		t.Fatalf("the rendered manifest is not a krew Plugin: %v\n%s", err, out.String())
	}
	return p
}
