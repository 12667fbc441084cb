#!/usr/bin/env bash
# The real-fleet suite (make fleets): builds GitLab Runner and its helper
# image (hack/fleets/gitlab.sh) and ARC from its source (hack/fleets/arc.sh;
# FLEETS=arc or FLEETS=gitlab builds one; FLEETS=tekton, or a list naming it,
# builds Tekton Pipelines, hack/fleets/tekton.sh; FLEETS=woodpecker builds
# Woodpecker's agent and the suite's stand-in server, hack/fleets/woodpecker.sh;
# FLEETS=buildkite builds Buildkite's agent-stack-k8s and agent,
# hack/fleets/buildkite.sh; the default builds all five), brings the one-node cluster
# up, installs runnerguard as the node suite does, loads the helper image and
# Tekton's and Buildkite's images into the node,
# runs go test -tags fleets ./e2e/fleets/ and tears the cluster down, pass
# or fail (KEEP_CLUSTER=1 leaves it running for a look around).
# Usage: hack/fleets.sh [go test flags]   (after hack/node-deps.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
fleets=${FLEETS:-gitlab arc tekton buildkite woodpecker}
for f in $fleets; do
  "hack/fleets/$f.sh"
done
if [ "${KEEP_CLUSTER:-}" != 1 ]; then
  trap 'go run ./e2e/cluster down; echo "component logs kept in .cache/cluster/logs" >&2' EXIT
fi
go run ./e2e/cluster up
go run ./e2e/cluster install
if [[ " $fleets " == *" gitlab "* ]]; then
  ctr --address .cache/cluster/run/containerd.sock -n k8s.io images import --all-platforms .cache/images/gitlab-helper.tar
fi
if [[ " $fleets " == *" tekton "* ]]; then
  ctr --address .cache/cluster/run/containerd.sock -n k8s.io images import --all-platforms .cache/images/tekton-images.tar
fi
if [[ " $fleets " == *" buildkite "* ]]; then
  ctr --address .cache/cluster/run/containerd.sock -n k8s.io images import --all-platforms .cache/images/buildkite-agent.tar
fi
go test -tags fleets -count=1 -timeout 40m "${@:--v}" ./e2e/fleets/
