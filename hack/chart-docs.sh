#!/usr/bin/env bash
# The chart's README (charts/runnerguard/README.md), rendered by helm-docs
# from values.yaml's `# --` comments and README.md.gotmpl.
#   hack/chart-docs.sh          regenerate it (make chart-docs)
#   hack/chart-docs.sh --check  fail if a value has no description or the
#                               committed README differs from a fresh render
#                               (make chart-docs-check, early in make test)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
chart=charts/runnerguard
cd "$root"
hack/tools.sh helm-docs
helm_docs=(.cache/bin/helm-docs --chart-search-root charts --log-level warning)

fresh=$(mktemp)
trap 'rm -f "$fresh"' EXIT
"${helm_docs[@]}" --dry-run > "$fresh"

# A value shown with an empty Description cell has no `# --` comment.
undescribed=$(awk -F'|' 'NF >= 6 && $2 !~ /^ *(Key|-+) *$/ && $5 ~ /^ *$/ {gsub(/ /, "", $2); print "  " $2}' "$fresh")
if [ -n "$undescribed" ]; then
  echo "chart-docs: these values in $chart/values.yaml have no description; add a '# --' comment above each:" >&2
  echo "$undescribed" >&2
  exit 1
fi

if [ "${1:-}" = --check ]; then
  if ! diff -u "$chart/README.md" "$fresh" > /dev/null 2>&1; then
    diff -u "$chart/README.md" "$fresh" | head -40 >&2 || true
    echo "chart-docs: $chart/README.md is stale (values.yaml or README.md.gotmpl changed): run 'make chart-docs' and commit the result" >&2
    exit 1
  fi
  echo "chart-docs: $chart/README.md is up to date"
  exit 0
fi
cp "$fresh" "$chart/README.md"
echo "chart-docs: wrote $chart/README.md"
