#!/usr/bin/env bash
# Installs the pinned Go tools the chart and image targets need into
# .cache/bin, built from the Go module proxy: helm (Helm 4), helm3 (Helm 3),
# crane, actionlint (the release workflow's linter), promtool (the
# chart's alert rules), helm-docs (the chart's README from values.yaml's
# comments) and kwok (the simulated nodes of make scale). All but actionlint
# build from hack/tools at the version its go.mod requires: one module for
# the harness's tools (the Kubernetes binaries and Karpenter's provider
# too), so the libraries they share compile once, not once per tool.
# Each version is built once into .cache/tools/<name>-<version> and linked
# from .cache/bin, so a warm run builds nothing and a version bump rebuilds
# only that tool.
# Usage: hack/tools.sh [helm|helm3|crane|actionlint|promtool|helm-docs|kwok ...]   (default: all but promtool and kwok)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/.cache/bin"
tools="$root/.cache/tools"
mod="$root/hack/tools"
mkdir -p "$bin" "$tools"

# version MODULE: the version hack/tools/go.mod requires of it.
version() {
  local v
  v=$(awk -v m="$1" '($1 == m && $2 ~ /^v/) || ($1 == "require" && $2 == m) { print ($1 == m ? $2 : $3); exit }' "$mod/go.mod")
  [ -n "$v" ] || { echo "hack/tools.sh: hack/tools/go.mod requires no $1" >&2; exit 2; }
  echo "$v"
}

# install <link name> <version> <package> <binary name> <ldflags> [build tags]
# builds the package in hack/tools; with own=1, by `go install
# <package>@<version>` from the tool's own go.mod instead.
install() {
  local name=$1 version=$2 pkg=$3 binary=$4 ldflags=$5 tags=${6:-}
  local dir="$tools/$name-$version" lock
  # One build of a tool at a time: make test's two lanes can both ask for
  # it, and the second finds it built.
  exec {lock}> "$dir.lock"
  flock "$lock"
  if [ ! -x "$dir/$binary" ]; then
    echo ">> building $name $version from the Go module proxy (cold: helm takes ~3.5 min on 2 cores, less once another tool built what they share)" >&2
    local start=$SECONDS
    rm -rf "$dir.tmp"
    # GOTOOLCHAIN=local: build with the Go the rest of the repository uses.
    if [ -n "${own:-}" ]; then
      GOBIN="$dir.tmp" CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS= \
        go install -trimpath -tags "$tags" -ldflags "$ldflags" "$pkg@$version"
    else
      (cd "$mod" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly \
        go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$dir.tmp/$binary" "$pkg")
    fi
    rm -rf "$dir" && mv "$dir.tmp" "$dir"
    echo ">> built $name in $((SECONDS - start))s" >&2
  fi
  # Relative, so a .cache shared by a symlink links to its own tools.
  ln -sfn "../tools/$name-$version/$binary" "$bin/$name"
  exec {lock}>&-
}

# Helm's own Makefiles set these; without them `helm version` prints only
# the major.minor, and Helm 3 assumes Kubernetes 1.20 for .Capabilities and
# lint (Helm 4 reads it from its client-go at run time).
helm4() {
  local helm4_version
  helm4_version=$(version helm.sh/helm/v4)
  install helm "$helm4_version" helm.sh/helm/v4/cmd/helm helm \
    "-s -w -X helm.sh/helm/v4/internal/version.version=$helm4_version -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
}
helm3() {
  local helm3_version k
  helm3_version=$(version helm.sh/helm/v3)
  k="-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=37"
  k+=" -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=37"
  install helm3 "$helm3_version" helm.sh/helm/v3/cmd/helm helm \
    "-s -w -X helm.sh/helm/v3/internal/version.version=$helm3_version -X helm.sh/helm/v3/internal/version.gitTreeState=clean $k"
}
crane() {
  local crane_version
  crane_version=$(version github.com/google/go-containerregistry)
  install crane "$crane_version" github.com/google/go-containerregistry/cmd/crane crane \
    "-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$crane_version"
}

# actionlint is not in hack/tools: its YAML library is a pre-release
# (go.yaml.in/yaml/v4) whose API changed at the version another module
# there requires, and it shares almost nothing with the other tools.
actionlint() {
  local actionlint_version=v1.7.12
  own=1 install actionlint "$actionlint_version" github.com/rhysd/actionlint/cmd/actionlint actionlint \
    "-s -w -X github.com/rhysd/actionlint.version=$actionlint_version"
}

# make alerts-test runs the chart's alert rules through `promtool test rules`.
# remove_all_sd (Prometheus's own build tag) leaves out the cloud service
# discoveries and their SDKs, most of a cold build, which rule tests never
# use: only the file, HTTP and Kubernetes discoveries stay in. Prometheus
# tags its Go module v0.<major*100+minor>.<patch> for release
# <major>.<minor>.<patch> (v0.316.0 is Prometheus 3.16.0), the version
# promtool --version prints.
promtool() {
  local promtool_version promtool_release m
  promtool_version=$(version github.com/prometheus/prometheus)
  m=${promtool_version#v0.}
  promtool_release="$((${m%%.*} / 100)).$((${m%%.*} % 100)).${m#*.}"
  install promtool "$promtool_version" github.com/prometheus/prometheus/cmd/promtool promtool \
    "-s -w -X github.com/prometheus/common/version.Version=$promtool_release" remove_all_sd
}

# make chart-docs renders the chart's README; its version is printed in
# the README's footer, so the check is the same on every machine.
helm_docs() {
  local helm_docs_version
  helm_docs_version=$(version github.com/norwoodj/helm-docs)
  install helm-docs "$helm_docs_version" github.com/norwoodj/helm-docs/cmd/helm-docs helm-docs \
    "-s -w -X main.version=${helm_docs_version#v}"
}

# make scale: kwok drives the simulated fleet's nodes and pods through the
# Stages in e2e/scale/testdata.
kwok() {
  local kwok_version
  kwok_version=$(version sigs.k8s.io/kwok)
  install kwok "$kwok_version" sigs.k8s.io/kwok/cmd/kwok kwok "-s -w"
}

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(helm helm3 crane actionlint)
for t in "${want[@]}"; do
  case "$t" in
    helm) helm4 ;;
    helm3) helm3 ;;
    crane) crane ;;
    actionlint) actionlint ;;
    promtool) promtool ;;
    helm-docs) helm_docs ;;
    kwok) kwok ;;
    *) echo "hack/tools.sh: unknown tool $t" >&2; exit 2 ;;
  esac
done
