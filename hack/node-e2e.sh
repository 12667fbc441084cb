#!/usr/bin/env bash
# The node e2e suite: brings the one-node cluster up, installs the chart,
# runs go test -tags node ./e2e/node/ and tears the cluster down, pass or
# fail (KEEP_CLUSTER=1 leaves it running for a look around).
# Usage: hack/node-e2e.sh [go test flags]   (after hack/node-deps.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# The install publishes a release to the cluster's registry; the suite uses
# its image and chart, not the kubectl plugin's archives, so only this
# machine's archive is built (a cold cross-compile per platform: make
# krew-test KREW_PLATFORMS=all and the release workflow build them all).
# Likewise the image: this machine's platform only, built and checked by
# the same script (hack/image.sh) as `make image` and the release workflow,
# which build both.
export PLUGIN_PLATFORMS=${PLUGIN_PLATFORMS:-$(go env GOOS)_$(go env GOARCH)}
export IMAGE_PLATFORMS=${IMAGE_PLATFORMS:-$(go env GOARCH)}
if [ "${KEEP_CLUSTER:-}" != 1 ]; then
  trap 'go run ./e2e/cluster down; echo "component logs kept in .cache/cluster/logs" >&2' EXIT
fi
go run ./e2e/cluster up
go run ./e2e/cluster install
go test -tags node -count=1 -timeout 20m "${@:--v}" ./e2e/node/
