// Package api stands in for step-runner's API (see the module's doc.go).
package api

// DefaultSocketPath is where step-runner would listen.
func DefaultSocketPath() string { return "/tmp/step-runner.sock" }
