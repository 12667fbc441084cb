#!/usr/bin/env bash
# The node e2e suite: brings the one-node cluster up, installs the chart,
# runs go test -tags node ./e2e/node/ and tears the cluster down, pass or
# fail (KEEP_CLUSTER=1 leaves it running for a look around).
# Usage: hack/node-e2e.sh [go test flags]   (after hack/node-deps.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The install publishes a release of this machine's platform to the
# cluster's registry (e2e/cluster install.go, thisPlatformOnly): its image
# is built and checked by the script (hack/image.sh) that builds both for
# `make image` and the release workflow.
if [ "${KEEP_CLUSTER:-}" != 1 ]; then
  trap 'go run ./e2e/cluster down; echo "component logs kept in .cache/cluster/logs" >&2' EXIT
fi
go run ./e2e/cluster up
go run ./e2e/cluster install
go test -tags node -count=1 -timeout 20m "${@:--v}" ./e2e/node/
