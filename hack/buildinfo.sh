# shellcheck shell=bash
# Sourced by hack/image.sh and hack/plugin.sh, so the image's binaries and
# the kubectl plugin's archives are stamped alike (internal/version) and
# both rebuild to the same bytes: sets version (VERSION, else the chart's
# appVersion), commit (HEAD, with -dirty when tracked files changed), epoch
# and date (the commit's time, or SOURCE_DATE_EPOCH) and ldflags (stripped,
# an empty build id, the three -X). Build with
# CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags". Needs $root.
version=${VERSION:-$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$root/charts/runnerguard/Chart.yaml")}
commit=$(git -C "$root" rev-parse HEAD)
[ -z "$(git -C "$root" status --porcelain --untracked-files=no)" ] || commit+=-dirty
epoch=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct)}
date=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w -buildid= -X github.com/runnerguard/runnerguard/internal/version.Version=$version"
ldflags+=" -X github.com/runnerguard/runnerguard/internal/version.Commit=$commit"
ldflags+=" -X github.com/runnerguard/runnerguard/internal/version.Date=$date"
