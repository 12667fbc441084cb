// Package alerts tests the chart's monitoring: the PrometheusRule's alerts
// under promtool's rule unit tests, the Grafana dashboard's ConfigMap, and
// every PromQL query of both parsed by Prometheus's own parser and checked to
// name only metrics runnerguard serves. A separate module, so Prometheus's
// dependencies never touch runnerguard's go.mod. `make alerts-test` runs it
// with Helm and promtool; without them only the dashboard's queries are
// checked.
package alerts
