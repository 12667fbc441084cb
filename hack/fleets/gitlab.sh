#!/usr/bin/env bash
# Builds GitLab Runner (19.4, from the Go module proxy; hack/fleets/gitlab is
# its module, with local stand-ins for the modules the proxy refuses) and
# the build pods' helper image, for the real-fleet suite:
#   .cache/fleets/gitlab/gitlab-runner   the manager, run on the host
#   .cache/images/gitlab-helper.tar       runnerguard.local/e2e/gitlab-helper:1:
#                                         busybox, bash, the same binary as
#                                         gitlab-runner-helper, and
#                                         gitlab-runner-build
# Each is rebuilt only when its inputs change (a checksum next to it).
# Usage: hack/fleets/gitlab.sh   (after hack/node-images.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
mod="$root/hack/fleets/gitlab"
bin="$root/.cache/fleets/gitlab"
out="$root/.cache/images"
mkdir -p "$bin" "$out"

sum=$( (cd "$mod" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) | sort | xargs cat; go version) | sha256sum | cut -c1-16)
if [ ! -x "$bin/gitlab-runner" ] || [ "$(cat "$bin/gitlab-runner.sum" 2>/dev/null)" != "$sum" ]; then
  echo ">> building gitlab-runner (GitLab Runner 19.4, the Kubernetes executor only; minutes on a cold cache)" >&2
  (cd "$mod" && CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags "-s -w" -o "$bin/gitlab-runner.tmp" .)
  mv "$bin/gitlab-runner.tmp" "$bin/gitlab-runner"
  echo "$sum" > "$bin/gitlab-runner.sum"
fi

"$root/hack/debian.sh" bash-static
helper_sum=$(cat "$bin/gitlab-runner" /bin/busybox /bin/bash-static "$0" | sha256sum | cut -c1-16)
if [ -f "$out/gitlab-helper.tar" ] && [ "$(cat "$out/gitlab-helper.sum" 2>/dev/null)" = "$helper_sum" ]; then
  exit 0
fi
"$root/hack/tools.sh" crane
crane="$root/.cache/bin/crane"
# shellcheck source=hack/registry.sh
. "$root/hack/registry.sh"
r="$work/helper"
mkdir -p "$r/bin" "$r/usr/bin" "$r/tmp"
chmod 1777 "$r/tmp"
cp /bin/busybox "$r/bin/busybox"
for applet in $(/bin/busybox --list); do
  [ "$applet" = busybox ] || ln -s busybox "$r/bin/$applet"
done
# GitLab Runner runs the helper container's scripts with bash, which the
# official helper image has: Debian's static bash.
install -m 0755 /bin/bash-static "$r/bin/bash"
install -m 0755 "$bin/gitlab-runner" "$r/usr/bin/gitlab-runner-helper"
# The executor runs every script it starts in the helper container (the
# prepare, cache and artifact stages) as gitlab-runner-build, which the
# official helper image has: a bash with the umask cleared, so the build
# container's user can write what the helper writes.
printf '#!/bin/bash\numask 0000\nexec /bin/bash "$@"\n' > "$r/usr/bin/gitlab-runner-build"
chmod 0755 "$r/usr/bin/gitlab-runner-build"
ln -s gitlab-runner-helper "$r/usr/bin/gitlab-runner"
# The stage scripts start with #!/usr/bin/env sh.
ln -s /bin/busybox "$r/usr/bin/env"
ref=runnerguard.local/e2e/gitlab-helper:1 local_ref="127.0.0.1:$port/e2e/gitlab-helper:1"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$r" -cf "$work/helper.tar" .
"$crane" append --oci-empty-base --platform linux/amd64 -f "$work/helper.tar" -t "$local_ref" > /dev/null 2>> "$work/crane.log"
"$crane" mutate "$local_ref" --set-platform linux/amd64 --entrypoint /bin/sh --env PATH=/usr/bin:/bin -t "$ref" -o "$out/gitlab-helper.tar.tmp" > /dev/null
mv "$out/gitlab-helper.tar.tmp" "$out/gitlab-helper.tar"
echo "$helper_sum" > "$out/gitlab-helper.sum"
echo "$ref -> $out/gitlab-helper.tar ($(du -h "$out/gitlab-helper.tar" | cut -f1))"
