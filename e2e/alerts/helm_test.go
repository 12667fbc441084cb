package alerts

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const (
	chartDir      = "../../charts/runnerguard"
	dashboardFile = chartDir + "/dashboards/runnerguard.json"
	release       = "runnerguard"
	namespace     = "runnerguard"
)

// tool returns the binary named by $env, which `make alerts-test` sets;
// without it the test skips, so a plain `go test ./...` passes on a machine
// without Helm or promtool.
func tool(t *testing.T, env string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		t.Skipf("$%s is not set: run `make alerts-test`, which builds it and sets it", env)
	}
	return p
}

// run runs a binary and returns stdout, with stderr as the error text when
// it fails.
func run(name string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(strings.TrimSpace(stdout.String() + "\n" + stderr.String() + "\n" + err.Error()))
	}
	return stdout.String(), nil
}

// render renders one template of the chart with values files (YAML)
// layered over the defaults; "" when the template renders nothing.
func render(t *testing.T, template string, values ...string) string {
	t.Helper()
	// Not t.TempDir: Helm splits --values on commas, and test names have them.
	dir, err := os.MkdirTemp("", "runnerguard-alerts-values")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	args := []string{"template", release, chartDir, "--namespace", namespace, "--show-only", "templates/" + template}
	for i, v := range values {
		f := filepath.Join(dir, fmt.Sprintf("values-%d.yaml", i))
		require.NoError(t, os.WriteFile(f, []byte(v), 0o600))
		args = append(args, "--values", f)
	}
	out, err := run(tool(t, "HELM"), args...)
	if err != nil && strings.Contains(err.Error(), "could not find template") {
		return "" // Helm's answer when the template rendered empty
	}
	require.NoError(t, err, "helm template")
	return out
}

// rule is one alerting rule of the rendered PrometheusRule.
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type group struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type prometheusRule struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Groups []group `json:"groups"`
	} `json:"spec"`
}

// rules renders the PrometheusRule with values layered over
// monitoring.prometheusRule.enabled=true.
func rules(t *testing.T, values string) prometheusRule {
	t.Helper()
	out := render(t, "prometheusrule.yaml", "monitoring: {prometheusRule: {enabled: true}}", values)
	require.NotEmpty(t, out, "no PrometheusRule rendered")
	var pr prometheusRule
	require.NoError(t, yaml.Unmarshal([]byte(out), &pr))
	require.Equal(t, "PrometheusRule", pr.Kind)
	return pr
}

// alerts maps alert names to their rules.
func (pr prometheusRule) alerts() map[string]rule {
	m := map[string]rule{}
	for _, g := range pr.Spec.Groups {
		for _, r := range g.Rules {
			m[r.Alert] = r
		}
	}
	return m
}
