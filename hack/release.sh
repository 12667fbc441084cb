#!/usr/bin/env bash
# make release: publishes a release to any OCI registry, the way users pull
# it. The two-platform image index (hack/image.sh) goes to
# REGISTRY/runnerguard:VERSION; the chart, packaged with its image pinned by
# that index's digest, goes to oci://REGISTRY/charts/runnerguard, version
# VERSION. The chart in git keeps its tag-based default: only the packaged
# copy's values.yaml is rewritten. The kubectl plugin's archives and their
# checksums (hack/plugin.sh) are built into .cache/release/plugin/ for the
# release workflow to attach to the GitHub release.
#
# Credentials: the tools' own logins (docker's config.json for crane, helm
# registry login for helm), or REGISTRY_USER and REGISTRY_PASSWORD, which
# log both in. A loopback registry is spoken to over plain HTTP.
# Outputs (also appended to $GITHUB_OUTPUT when set): image, digest,
# chart, chart_digest, version, plugin_dir, in .cache/release/outputs.
# Usage: REGISTRY=ghcr.io/OWNER hack/release.sh   (VERSION, when set, must
# equal the chart's version: bump charts/runnerguard/Chart.yaml to release)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fail() { echo "hack/release.sh: $*" >&2; exit 1; }
registry=${REGISTRY:?set REGISTRY, e.g. REGISTRY=ghcr.io/OWNER}
registry=${registry%/}
chart_dir="$root/charts/runnerguard"
field() { sed -n "s/^$1: *\"\{0,1\}\([^\"]*\)\"\{0,1\} *\$/\1/p" "$chart_dir/Chart.yaml"; }
version=$(field version)
[ "$(field appVersion)" = "$version" ] || fail "Chart.yaml: version $version and appVersion $(field appVersion) differ"
[ -z "${VERSION:-}" ] || [ "$VERSION" = "$version" ] ||
  fail "VERSION=$VERSION but the chart is $version: bump charts/runnerguard/Chart.yaml first"

"$root/hack/tools.sh" helm crane
helm="$root/.cache/bin/helm" crane="$root/.cache/bin/crane"
host=${registry%%/*}
plain=()
case "$host" in 127.0.0.1:* | localhost:* | localhost | "[::1]:"*) plain=(--plain-http) ;; esac
if [ -n "${REGISTRY_USER:-}" ]; then
  "$crane" auth login "$host" -u "$REGISTRY_USER" --password-stdin <<< "${REGISTRY_PASSWORD:?}" >/dev/null
  "$helm" registry login "$host" "${plain[@]}" --username "$REGISTRY_USER" --password-stdin <<< "$REGISTRY_PASSWORD" >/dev/null
fi

out="$root/.cache/release"
# Built before anything is pushed: a platform that fails to build stops the
# release while nothing is published yet.
rm -rf "$out/plugin"
VERSION=$version "$root/hack/plugin.sh" "$out/plugin"

image="$registry/runnerguard"
rm -rf "$out/image"
VERSION=$version IMAGE_OUT="$out/image" "$root/hack/image.sh" "$image:$version"
digest=$(cat "$out/image/runnerguard.digest")
platforms=$(cat "$out/image/runnerguard.platforms")

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$chart_dir" "$work/runnerguard"
values="$work/runnerguard/values.yaml"
# The two lines under image: (values.schema.json forbids any other shape).
sed -i -e "s#^  repository: ghcr.io/runnerguard/runnerguard\$#  repository: $image#" \
  -e "s#^  digest: \"\"\$#  digest: \"$digest\"#" "$values"
rendered=$("$helm" template runnerguard "$work/runnerguard" --namespace runnerguard)
grep -q "image: $image@$digest\$" <<< "$rendered" ||
  fail "the packaged chart does not render image $image@$digest: $(grep 'image:' <<< "$rendered")"

mkdir -p "$out"
rm -f "$out/runnerguard-$version.tgz"
"$helm" package "$work/runnerguard" --destination "$out" >/dev/null
push=$("$helm" push "$out/runnerguard-$version.tgz" "oci://$registry/charts" "${plain[@]}" 2>&1) || fail "helm push: $push"
chart_digest=$(sed -n 's/^Digest: *//p' <<< "$push")
[ -n "$chart_digest" ] || fail "no digest in helm push's output: $push"

cat > "$out/outputs" <<EOF
image=$image
digest=$digest
chart=$registry/charts/runnerguard
chart_digest=$chart_digest
version=$version
plugin_dir=$out/plugin
EOF
[ -z "${GITHUB_OUTPUT:-}" ] || cat "$out/outputs" >> "$GITHUB_OUTPUT"
cat <<EOF
released runnerguard $version
  image  $image:$version@$digest ($platforms)
  chart  oci://$registry/charts/runnerguard:$version@$chart_digest (image pinned by digest)
  kubectl plugin  $out/plugin/ ($(cd "$out/plugin" && echo *.tar.gz), checksums)
install:
  helm install runnerguard oci://$registry/charts/runnerguard --version $version -n runnerguard --create-namespace${plain:+ ${plain[*]}}
EOF
