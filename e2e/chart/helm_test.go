package chart_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "../../charts/runnerguard"
	// release and namespace are what `make manifests` renders with.
	release   = "runnerguard"
	namespace = "runnerguard"
)

// helm is one Helm binary the tests drive.
type helm struct {
	name string // "helm4" or "helm3", for subtest names
	path string
}

// helms returns Helm 4 and Helm 3 from $HELM and $HELM3, which
// `make chart-test` sets after building them; without them the test skips,
// so a plain `go test ./...` passes on a machine without Helm.
func helms(t *testing.T) []helm {
	t.Helper()
	var hs []helm
	for _, v := range []struct{ env, name string }{{"HELM", "helm4"}, {"HELM3", "helm3"}} {
		p := os.Getenv(v.env)
		if p == "" {
			t.Skipf("$%s is not set: run `make chart-test`, which builds Helm and sets it", v.env)
		}
		hs = append(hs, helm{name: v.name, path: p})
	}
	return hs
}

// helm4 returns Helm 4 alone, for checks whose answer does not depend on
// the Helm version.
func helm4(t *testing.T) helm { return helms(t)[0] }

// run runs helm with args and returns stdout, and stderr as the error text
// when helm fails.
func (h helm) run(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(h.path, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No repositories or plugins of the user's leak in.
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+os.TempDir()+"/runnerguard-helm-config",
		"HELM_CACHE_HOME="+os.TempDir()+"/runnerguard-helm-cache", "HELM_DATA_HOME="+os.TempDir()+"/runnerguard-helm-data")
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(strings.TrimSpace(stderr.String() + "\n" + err.Error()))
	}
	return stdout.String(), nil
}

// template renders the chart with the given values files (YAML strings)
// layered over the defaults.
func (h helm) template(t *testing.T, values ...string) (string, error) {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace}
	for i, v := range values {
		f := filepath.Join(valuesDir(t), fmt.Sprintf("values-%d.yaml", i))
		require.NoError(t, os.WriteFile(f, []byte(v), 0o600))
		args = append(args, "--values", f)
	}
	return h.run(args...)
}

// valuesDir is a temporary folder for values files. Not t.TempDir: Helm
// splits --values on commas, and subtest names have them.
func valuesDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "runnerguard-chart-values")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// render is template that must succeed, parsed into objects.
func (h helm) render(t *testing.T, values ...string) objects {
	t.Helper()
	out, err := h.template(t, values...)
	require.NoError(t, err, "helm template")
	return parse(t, out)
}

// objects are the documents of a rendered chart.
type objects []*unstructured.Unstructured

func parse(t *testing.T, manifest string) objects {
	t.Helper()
	var objs objects
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(manifest)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, yaml.Unmarshal(doc, &m))
		if len(m) > 0 {
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
}

// find returns the object of that kind and name, or nil.
func (o objects) find(kind, name string) *unstructured.Unstructured {
	for _, u := range o {
		if u.GetKind() == kind && u.GetName() == name {
			return u
		}
	}
	return nil
}

// get is find that must succeed, converted into out (a typed object).
func (o objects) get(t *testing.T, kind, name string, out any) {
	t.Helper()
	u := o.find(kind, name)
	require.NotNil(t, u, "no %s %q rendered", kind, name)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true),
		"%s %q does not fit its Go type", kind, name)
}

// kinds lists "Kind/name" of every object, for assertions on what exists.
func (o objects) kinds() []string {
	var ks []string
	for _, u := range o {
		ks = append(ks, u.GetKind()+"/"+u.GetName())
	}
	return ks
}
