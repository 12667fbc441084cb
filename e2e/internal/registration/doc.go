// Package registration builds, for the test suites, the webhook
// configurations and the admission policy the chart deploys, from a Go
// config: the suites register them on their own API servers, and the chart
// tests check that the chart renders the same objects.
package registration
