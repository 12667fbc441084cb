package chart_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helm lint --strict fails on warnings as well as errors; users run both
// Helm 4 and Helm 3, so the chart must pass both, with the defaults and with
// the options that switch templates on or off.
func TestLintStrict(t *testing.T) {
	cases := []struct{ name, values string }{
		{name: "defaults"},
		{name: "listed namespaces, an existing issuer and a ServiceMonitor", values: `namespaces: [ci]
certManager: {issuerRef: {name: corp-ca, kind: ClusterIssuer}}
metrics: {serviceMonitor: {enabled: true, interval: 1m}}`},
		{name: "the alerts and the dashboard", values: "monitoring: {prometheusRule: {enabled: true}, grafanaDashboard: {enabled: true}}"},
		{name: "single replica without a budget or metrics", values: "replicaCount: 1\npodDisruptionBudget: {enabled: false}\nmetrics: {enabled: false}\nserviceAccount: {create: false}\nwatcher: {enabled: false}"},
	}
	for _, h := range helms(t) {
		for _, tc := range cases {
			t.Run(h.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				args := []string{"lint", "--strict", chartDir}
				if tc.values != "" {
					f := filepath.Join(valuesDir(t), "values.yaml")
					require.NoError(t, os.WriteFile(f, []byte(tc.values), 0o600))
					args = append(args, "--values", f)
				}
				out, err := h.run(args...)
				require.NoError(t, err, out)
				assert.Contains(t, out, "1 chart(s) linted, 0 chart(s) failed")
			})
		}
	}
}
