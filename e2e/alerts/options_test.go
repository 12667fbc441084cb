package alerts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Both are opt-in: the defaults render neither, and neither without metrics.
func TestMonitoringIsOptIn(t *testing.T) {
	for name, values := range map[string]string{
		"defaults": "",
		"metrics off": `metrics: {enabled: false}
monitoring: {prometheusRule: {enabled: true}, grafanaDashboard: {enabled: true}}`,
	} {
		t.Run(name, func(t *testing.T) {
			assert.Empty(t, render(t, "prometheusrule.yaml", values))
			assert.Empty(t, render(t, "dashboard-configmap.yaml", values))
		})
	}
}

// Each threshold lands in its rule; a switched-off alert is gone; the
// leader alert exists only with the watcher.
func TestAlertValues(t *testing.T) {
	pr := rules(t, `monitoring:
  prometheusRule:
    labels: {release: prom}
    alertLabels: {team: ci-platform}
    alerts:
      runnerDeaths: {window: 6h, count: 20, ignoreClasses: [clean-exit]}
      drainWaiting: {for: 2h, severity: info}
      webhookLatency: {p99Seconds: 2.5}
      webhookErrors: {enabled: false}
watcher: {enabled: false}`)
	assert.Equal(t, "prom", pr.Metadata.Labels["release"])
	assert.Equal(t, namespace, pr.Metadata.Namespace)
	a := pr.alerts()
	assert.NotContains(t, a, "RunnerguardWebhookErrors")
	assert.NotContains(t, a, "RunnerguardNoWatcherLeader")
	assert.NotContains(t, a, "RunnerguardSwitchedOff", "the leader's alerts need the watcher")
	assert.Equal(t, `sum by (namespace, class) ((runnerguard_runner_deaths_total{class!~"clean-exit"} unless runnerguard_runner_deaths_total{class!~"clean-exit"} offset 6h) or increase(runnerguard_runner_deaths_total{class!~"clean-exit"}[6h])) >= 20`,
		a["RunnerguardRunnerDeaths"].Expr)
	assert.Equal(t, "2h", a["RunnerguardDrainWaiting"].For)
	assert.Equal(t, map[string]string{"severity": "info", "team": "ci-platform"}, a["RunnerguardDrainWaiting"].Labels)
	assert.Contains(t, a["RunnerguardWebhookLatency"].Expr, ") > 2.5")
	for name, r := range a {
		assert.Equal(t, "ci-platform", r.Labels["team"], name)
		assert.NotEmpty(t, r.Annotations["summary"], name)
		assert.NotEmpty(t, r.Annotations["description"], name)
	}
}

// The dashboard ConfigMap carries the chart's dashboard file unchanged, with
// the sidecar's label, in the namespace asked for.
func TestDashboardConfigMap(t *testing.T) {
	want, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	cases := map[string]struct {
		values        string
		namespace     string
		labels, annos map[string]string
	}{
		"defaults": {
			values:    "monitoring: {grafanaDashboard: {enabled: true}}",
			namespace: namespace,
			labels:    map[string]string{"grafana_dashboard": "1"},
		},
		"another label, Grafana's namespace and a folder": {
			values:    `monitoring: {grafanaDashboard: {enabled: true, namespace: monitoring, labels: {dashboards: grafana}, annotations: {grafana_folder: CI}}}`,
			namespace: "monitoring",
			labels:    map[string]string{"dashboards": "grafana", "grafana_dashboard": "1"},
			annos:     map[string]string{"grafana_folder": "CI"},
		},
		"the default label removed with null": {
			values:    "monitoring: {grafanaDashboard: {enabled: true, labels: {grafana_dashboard: null, dashboards: grafana}}}",
			namespace: namespace,
			labels:    map[string]string{"dashboards": "grafana"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var cm corev1.ConfigMap
			require.NoError(t, yaml.UnmarshalStrict([]byte(render(t, "dashboard-configmap.yaml", tc.values)), &cm))
			assert.Equal(t, release+"-dashboard", cm.Name)
			assert.Equal(t, tc.namespace, cm.Namespace)
			for k, v := range tc.labels {
				assert.Equal(t, v, cm.Labels[k])
			}
			if _, ok := tc.labels["grafana_dashboard"]; !ok {
				assert.NotContains(t, cm.Labels, "grafana_dashboard")
			}
			assert.Equal(t, tc.annos, cm.Annotations)
			assert.Equal(t, string(want), cm.Data["runnerguard.json"]+"\n")
		})
	}
}

// The schema refuses thresholds that would render a rule Prometheus rejects
// or one that never fires.
func TestSchemaRefusesBadMonitoringValues(t *testing.T) {
	helm := tool(t, "HELM")
	for name, values := range map[string]string{
		"a zero window":        "monitoring: {prometheusRule: {alerts: {runnersOOMKilled: {window: 0m}}}}",
		"a fraction":           "monitoring: {prometheusRule: {alerts: {drainWaiting: {for: 1.5h}}}}",
		"an empty duration":    `monitoring: {prometheusRule: {alerts: {runnersStuck: {for: ""}}}}`,
		"a ratio above one":    "monitoring: {prometheusRule: {alerts: {webhookErrors: {ratio: 5}}}}",
		"a count of zero":      "monitoring: {prometheusRule: {alerts: {deletesRefused: {count: 0}}}}",
		"a misspelt alert":     "monitoring: {prometheusRule: {alerts: {webhookLatancy: {p99Seconds: 1}}}}",
		"a class with a regex": "monitoring: {prometheusRule: {alerts: {runnerDeaths: {ignoreClasses: [\".*\"]}}}}",
	} {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "values.yaml")
			require.NoError(t, os.WriteFile(f, []byte(values), 0o600))
			_, err := run(helm, "template", release, chartDir, "--values", f)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "values don't meet the specifications of the schema")
		})
	}
}
