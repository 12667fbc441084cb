#!/usr/bin/env bash
# Builds Buildkite's Kubernetes stack (github.com/buildkite/agent-stack-k8s,
# unchanged) and the agent it runs (github.com/buildkite/agent/v3, the
# version the stack's go.mod names) for the real-fleet suite:
#   .cache/fleets/buildkite/agent-stack-k8s   the controller (main.go,
#                                             cmd/controller), run on the
#                                             host as its ServiceAccount
#   .cache/fleets/buildkite/buildkite-agent   the agent
#   .cache/images/buildkite-agent.tar         runnerguard.local/e2e/buildkite-agent:1,
#                                             the stack's agent image as the
#                                             pod uses it: /usr/local/bin/buildkite-agent
#                                             (the entrypoint: the agent
#                                             container runs `start`),
#                                             /usr/bin/tini-static (Debian's
#                                             tini), busybox, which the
#                                             copy-agent init container runs,
#                                             and buildkite-agent-entrypoint,
#                                             which the checkout container runs
# The stack's module is not on the Go module proxy: its source is the
# release tag of a git repository, BUILDKITE_STACK_GIT (a local mirror when
# there is one, else GitHub). The agent's module needs drjosh.dev/zzglob,
# which the proxy refuses; the same module's GitHub path stands in for it
# (a replace in the copied go.mod, the only change).
# Each is rebuilt only when its inputs change (a checksum next to it).
# BUILDKITE_STACK_VERSION picks another tag.
# Usage: hack/fleets/buildkite.sh   (after hack/node-images.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
version=${BUILDKITE_STACK_VERSION:-v0.47.0}
mirror=/work/.mirror/buildkite+agent-stack-k8s/repo
git_src=${BUILDKITE_STACK_GIT:-$([ -d "$mirror" ] && echo "$mirror" || echo https://github.com/buildkite/agent-stack-k8s)}
out="$root/.cache/fleets/buildkite"
images="$root/.cache/images"
mkdir -p "$out" "$images"

sum=$( (echo "$version"; go version; cat "$0") | sha256sum | cut -c1-16)
if [ ! -x "$out/agent-stack-k8s" ] || [ ! -x "$out/buildkite-agent" ] || [ "$(cat "$out/buildkite.sum" 2>/dev/null)" != "$sum" ]; then
  echo ">> building agent-stack-k8s $version and its buildkite-agent (minutes on a cold cache)" >&2
  rm -rf "$out/src" && mkdir -p "$out/src"
  if [ -d "$git_src" ]; then
    git -C "$git_src" archive "$version" | tar -x -C "$out/src"
  else
    git clone -q --depth 1 --branch "$version" "$git_src" "$out/src"
  fi
  (cd "$out/src" && go mod edit -replace drjosh.dev/zzglob=github.com/DrJosh9000/zzglob@v0.4.3 &&
    CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -mod=mod -trimpath -ldflags "-s -w" -o "$out/bin.tmp/" \
      . github.com/buildkite/agent/v3)
  mv "$out/bin.tmp/agent-stack-k8s" "$out/agent-stack-k8s"
  mv "$out/bin.tmp/agent" "$out/buildkite-agent"
  rmdir "$out/bin.tmp"
  echo "$sum" > "$out/buildkite.sum"
fi

"$root/hack/debian.sh" tini busybox-static
img_sum=$(cat "$out/buildkite-agent" /usr/bin/tini-static /bin/busybox "$0" | sha256sum | cut -c1-16)
if [ -f "$images/buildkite-agent.tar" ] && [ "$(cat "$images/buildkite-agent.sum" 2>/dev/null)" = "$img_sum" ]; then
  exit 0
fi
"$root/hack/tools.sh" crane
crane="$root/.cache/bin/crane"
# shellcheck source=hack/registry.sh
. "$root/hack/registry.sh"
r="$work/buildkite"
mkdir -p "$r/bin" "$r/usr/bin" "$r/usr/local/bin" "$r/tmp"
chmod 1777 "$r/tmp"
cp /bin/busybox "$r/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ "$applet" = busybox ] || ln -s busybox "$r/bin/$applet"
done
install -m 0755 "$out/buildkite-agent" "$r/usr/local/bin/buildkite-agent"
install -m 0755 /usr/bin/tini-static "$r/usr/bin/tini-static"
# The stack runs the checkout container's agent through the image's
# entrypoint script (`buildkite-agent-entrypoint kubernetes-bootstrap`),
# which the official image has: it runs buildkite-agent with its
# arguments (`start` when there are none).
printf '#!/bin/sh\nset -e\n[ $# -gt 0 ] || set -- start\nexec /usr/local/bin/buildkite-agent "$@"\n' > "$r/usr/local/bin/buildkite-agent-entrypoint"
chmod 0755 "$r/usr/local/bin/buildkite-agent-entrypoint"
ref=runnerguard.local/e2e/buildkite-agent:1 local_ref="127.0.0.1:$port/e2e/buildkite-agent:1"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$r" -cf "$work/buildkite.tar" .
"$crane" append --oci-empty-base --platform linux/amd64 -f "$work/buildkite.tar" -t "$local_ref" > /dev/null 2>> "$work/crane.log"
"$crane" mutate "$local_ref" --set-platform linux/amd64 --entrypoint /usr/local/bin/buildkite-agent \
  --env PATH=/usr/local/bin:/usr/bin:/bin -t "$ref" -o "$images/buildkite-agent.tar.tmp" > /dev/null
mv "$images/buildkite-agent.tar.tmp" "$images/buildkite-agent.tar"
echo "$img_sum" > "$images/buildkite-agent.sum"
echo "$ref -> $images/buildkite-agent.tar ($(du -h "$images/buildkite-agent.tar" | cut -f1))"
