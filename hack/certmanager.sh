#!/usr/bin/env bash
# Builds cert-manager's controllers (e2e/certmanager, the node's issuer of
# runnerguard's certificates) into .cache/certmanager, once per change of
# the runner's sources, under a lock (make test starts it early, beside the
# first stages, and hack/node-deps.sh asks for it again later).
# Usage: hack/certmanager.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cm="$root/.cache/certmanager"
mkdir -p "$cm"
exec 9> "$cm/.lock"
flock 9
sum=$(cat "$root"/e2e/certmanager/*.go "$root"/e2e/certmanager/go.mod "$root"/e2e/certmanager/go.sum | sha256sum | cut -c1-16)
if [ ! -x "$cm/certmanager" ] || [ "$(cat "$cm/certmanager.sum" 2>/dev/null)" != "$sum" ]; then
  echo ">> building cert-manager's controllers (e2e/certmanager); cold, about 4 minutes" >&2
  start=$SECONDS
  CGO_ENABLED=0 go build -C "$root/e2e/certmanager" -trimpath -ldflags "-s -w" -o "$cm/certmanager.tmp" .
  mv "$cm/certmanager.tmp" "$cm/certmanager"
  echo "$sum" > "$cm/certmanager.sum"
  echo ">> built cert-manager's controllers in $((SECONDS - start))s" >&2
fi
