// Package krew tests the kubectl plugin's release archives (hack/plugin.sh)
// against the krew manifest template (hack/krew/runnerguard.yaml) rendered
// as krew-release-bot renders it: the same platforms, checksums that match,
// and in each archive a kubectl-runnerguard built for its platform that runs.
// `make krew-test` runs it (build tag krew).
package krew
