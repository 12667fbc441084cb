#!/usr/bin/env bash
# Builds Woodpecker CI's agent (go.woodpecker-ci.org/woodpecker/v3, which the
# Go module proxy refuses: from a git mirror of its repository, unchanged;
# its dependencies come from the proxy) and the suite's stand-in for the
# Woodpecker server (e2e/fleets/woodpeckerapi, a module of its own that
# imports the same source's rpc/proto and pipeline/backend/types):
#   .cache/fleets/woodpecker/src                the source, as exported
#   .cache/fleets/woodpecker/woodpecker-agent   cmd/agent, run on the host
#                                               with the Kubernetes backend
#   .cache/fleets/woodpecker/woodpecker-standin the stand-in server
# No image: the steps run busybox (hack/node-images.sh), clone is off, and
# the backend's permission init image is used only for steps run as a
# non-root user, which the suite's steps are not.
# Each is rebuilt only when its inputs change (a checksum next to it).
# WOODPECKER_GIT (a git directory; default the mirror below) and
# WOODPECKER_REF (default HEAD) pick the source.
# Usage: hack/fleets/woodpecker.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
git_dir=${WOODPECKER_GIT:-/work/.mirror/woodpecker-ci+woodpecker/repo}
ref=${WOODPECKER_REF:-HEAD}
out="$root/.cache/fleets/woodpecker"
mkdir -p "$out"

commit=$(git -C "$git_dir" rev-parse --verify "$ref^{commit}" 2>/dev/null) ||
  { echo "woodpecker: no commit $ref in $git_dir (set WOODPECKER_GIT to a clone of github.com/woodpecker-ci/woodpecker)" >&2; exit 1; }
if [ ! -f "$out/src/go.mod" ] || [ "$(cat "$out/src.commit" 2>/dev/null)" != "$commit" ]; then
  echo ">> exporting Woodpecker $commit" >&2
  rm -rf "$out/src.tmp" && mkdir -p "$out/src.tmp"
  # What the agent and the stand-in build from: not the server, the CLI,
  # the web UI (a mirror may hold no blob for the server's fixtures).
  git -C "$git_dir" archive "$commit" -- go.mod go.sum LICENSE agent cmd/agent cmd/shared pipeline rpc shared version |
    tar -x -C "$out/src.tmp"
  rm -rf "$out/src" && mv "$out/src.tmp" "$out/src"
  echo "$commit" > "$out/src.commit"
fi

sum=$( (echo "$commit"; go version; cat "$0") | sha256sum | cut -c1-16)
if [ ! -x "$out/woodpecker-agent" ] || [ "$(cat "$out/woodpecker-agent.sum" 2>/dev/null)" != "$sum" ]; then
  echo ">> building woodpecker-agent ($commit; minutes on a cold cache)" >&2
  (cd "$out/src" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath \
    -ldflags "-s -w -X go.woodpecker-ci.org/woodpecker/v3/version.Version=next-${commit:0:10}" \
    -o "$out/woodpecker-agent.tmp" ./cmd/agent)
  mv "$out/woodpecker-agent.tmp" "$out/woodpecker-agent"
  echo "$sum" > "$out/woodpecker-agent.sum"
fi

mod="$root/e2e/fleets/woodpeckerapi"
sum=$( (echo "$commit"; go version; cd "$mod" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) | sort | xargs cat) | sha256sum | cut -c1-16)
if [ ! -x "$out/woodpecker-standin" ] || [ "$(cat "$out/woodpecker-standin.sum" 2>/dev/null)" != "$sum" ]; then
  echo ">> building the Woodpecker server stand-in (and testing it against the agent's own gRPC client)" >&2
  (cd "$mod" && go test -count=1 ./... && CGO_ENABLED=0 go build -trimpath -o "$out/woodpecker-standin.tmp" ./cmd/woodpecker-standin)
  mv "$out/woodpecker-standin.tmp" "$out/woodpecker-standin"
  echo "$sum" > "$out/woodpecker-standin.sum"
fi
