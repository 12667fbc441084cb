#!/usr/bin/env bash
# Builds ARC (actions-runner-controller, gha-runner-scale-set 0.14.2) from
# its public source for the real-fleet suite. The Go module proxy refuses
# ARC's module, so its source is fetched from its Git repository, outside
# make test, at the pinned commit:
#   .cache/fleets/arc/src             ARC's source (git archive of the commit)
#   .cache/fleets/arc/arc-controller  the EphemeralRunnerSet and EphemeralRunner
#                                     controllers (hack/fleets/arc), on the host
#   .cache/fleets/arc/ghalistener     ARC's listener (cmd/ghalistener), on the host
#   .cache/fleets/arc/crds            the chart's CRDs (EphemeralRunner, EphemeralRunnerSet)
# ARC_GIT names a local clone or mirror to read instead of GitHub.
# Each binary is rebuilt only when its inputs change (a checksum next to it).
# Usage: hack/fleets/arc.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
commit=9bb16ae49d0ce585d8e682aa7e2668a6e832d5d8 # tag gha-runner-scale-set-0.14.2
mod="$root/hack/fleets/arc"
out="$root/.cache/fleets/arc"
src="$out/src"
mkdir -p "$out"

if [ "$(cat "$src/.commit" 2>/dev/null)" != "$commit" ]; then
  git_dir=${ARC_GIT:-}
  if [ -z "$git_dir" ]; then
    git_dir="$out/git"
    if [ ! -d "$git_dir" ]; then
      echo ">> fetching ARC's source from GitHub" >&2
      git init -q --bare "$git_dir"
    fi
    git --git-dir="$git_dir" fetch -q --depth 1 https://github.com/actions/actions-runner-controller "$commit"
  fi
  rm -rf "$src.tmp" && mkdir -p "$src.tmp"
  git --git-dir="$git_dir" archive "$commit" | tar -x -C "$src.tmp"
  echo "$commit" > "$src.tmp/.commit"
  rm -rf "$src" && mv "$src.tmp" "$src"
fi

mkdir -p "$out/crds"
for kind in ephemeralrunners ephemeralrunnersets; do
  cp "$src/charts/gha-runner-scale-set-controller/crds/actions.github.com_$kind.yaml" "$out/crds/"
done

sum=$( (cd "$mod" && find . -type f \( -name '*.go' -o -name 'go.mod' -o -name 'go.sum' \) | sort | xargs cat; cat "$src/.commit"; go version) | sha256sum | cut -c1-16)
if [ ! -x "$out/ghalistener" ] || [ "$(cat "$out/arc.sum" 2>/dev/null)" != "$sum" ]; then
  echo ">> building ARC's controllers and listener (minutes on a cold cache)" >&2
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -o "$out/arc-controller.tmp" . &&
    CGO_ENABLED=0 go build -trimpath -o "$out/ghalistener.tmp" github.com/actions/actions-runner-controller/cmd/ghalistener)
  mv "$out/arc-controller.tmp" "$out/arc-controller"
  mv "$out/ghalistener.tmp" "$out/ghalistener"
  echo "$sum" > "$out/arc.sum"
fi
