// Package registration gives the suites that run runnerguard outside a
// cluster (e2e/api, e2e/load, e2e/scale) the chart's own webhook
// configurations, admission policy and override role: it renders
// charts/runnerguard with Helm for a config.Config and points the webhooks
// at the test server. The chart is the one writing of them; nothing here
// restates a rule, so what the suites prove is what the chart installs.
package registration
