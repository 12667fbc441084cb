// Package steprunner marks the stand-in for gitlab.com/gitlab-org/step-runner,
// which the Go module proxy refuses. GitLab Runner reaches step-runner only
// for a job that uses `run:` (GitLab Steps), job inputs, or the native-steps
// and concrete-job feature flags; a plain `script:` job with default flags
// runs through the shell and never reaches it. Every entry point here
// refuses with an error, so a job that did reach it fails, never runs wrong.
package steprunner
