#!/usr/bin/env bash
# `make test`: every stage in order, each timed (wall and CPU seconds), with
# a table of the stage times at the end (and at the first failure, which
# stops the run).
#
# The builds that only the later stages need (the node's control plane and
# kubelet, containerd, cert-manager's controllers, the node's images, kwok,
# Karpenter's provider, promtool, crane and the image's arm64 packages) run
# in the background beside the first suites, whose waits on the API server
# leave a core idle: on a cold machine they are most of the run. Their log
# is .cache/test-builds.log; their times are in the table. A stage that
# needs them waits for them first, so no build runs twice.
# The CPU column is the user and system time of the stage's processes once
# they have ended; the background builds' is in their own rows (and again in
# the wait's).
# Usage: hack/test.sh   (make test runs it; TEST_SERIAL=1 builds in line)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p .cache
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
builds_times=.cache/test-builds.times

# cpu_mark sets cpu to the CPU seconds this shell's ended children have
# used so far. `times` runs in this shell (a redirect, no subshell): a
# forked shell would count only its own children.
cpu=0
cpu_mark() {
  times > "$times_file"
  cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$times_file")
}

names=() secs=() cpus=()
start=$SECONDS
table() {
  echo
  echo ">> make test: stage times (wall and CPU seconds)"
  local i
  for i in "${!names[@]}"; do printf '   %-26s %5ds %6ds\n' "${names[$i]}" "${secs[$i]}" "${cpus[$i]}"; done
  cpu_mark
  printf '   %-26s %5ds %6ds\n' "total" "$((SECONDS - start))" "$cpu"
  if [ -s "$builds_times" ]; then
    echo ">> the builds beside the suites (wall and CPU seconds)"
    awk '{ printf "   %-26s %5ds %6ds\n", $1, $2, $3 }' "$builds_times"
  fi
}

# stage NAME COMMAND...: runs it, timed; a failure prints the table and ends
# the run.
stage() {
  local name=$1 t=$SECONDS c
  shift
  echo ">> stage $name"
  cpu_mark
  c=$cpu
  if ! "$@"; then
    local passed=${#names[@]}
    cpu_mark
    names+=("$name (FAILED)") secs+=($((SECONDS - t))) cpus+=($((cpu - c)))
    table
    echo "stages: $passed passed, 1 failed"
    exit 1
  fi
  cpu_mark
  names+=("$name") secs+=($((SECONDS - t))) cpus+=($((cpu - c)))
}

# step NAME COMMAND...: one of the background builds, its wall and CPU
# seconds appended to $builds_times.
step() {
  local name=$1 t=$SECONDS c
  shift
  echo ">> build $name" >&2
  cpu_mark
  c=$cpu
  "$@"
  cpu_mark
  echo "$name $((SECONDS - t)) $((cpu - c))" >> "$builds_times"
}

m() { make --no-print-directory "$@"; }

# The later stages' builds, in the order the stages need them; run as
# `hack/test.sh --builds` in a session of its own, so that a failed run ends
# them whole. The arm64 step compiles the image's packages for arm64 (into
# the build cache; the image stage links them).
builds() {
  step kcm,scheduler,kubelet hack/kube.sh kube-controller-manager kube-scheduler kubelet
  step kwok hack/tools.sh kwok
  step karpenter-kwok hack/karpenter.sh
  step promtool hack/tools.sh promtool
  step crane hack/tools.sh crane
  step image-arm64 env CGO_ENABLED=0 GOOS=linux GOARCH=arm64 go build -trimpath ./cmd/runnerguard ./cmd/vitals
  step node-deps hack/node-deps.sh
}
if [ "${1:-}" = --builds ]; then
  rm -f "$builds_times"
  builds
  exit
fi
builds_pid=
waited=
wait_builds() {
  [ -n "$builds_pid" ] && [ -z "$waited" ] || return 0
  waited=1
  wait "$builds_pid" || { echo "the builds beside the suites failed: .cache/test-builds.log" >&2; tail -30 .cache/test-builds.log >&2; return 1; }
}

stage chart-docs-check m chart-docs-check
stage lint m lint
stage drift m drift
stage workflow-lint m workflow-lint
# kube-apiserver, etcd, kubectl and Helm first: the suites below and the
# node's build both need them, and two builds of one binary must not race.
stage kube-bin m kube-bin helm-bin
rm -f "$builds_times"
if [ "${TEST_SERIAL:-}" = 1 ]; then
  stage builds builds
else
  setsid "$0" --builds > .cache/test-builds.log 2>&1 < /dev/null &
  builds_pid=$!
  trap 'rm -f "$times_file"; [ -n "$waited" ] || [ -z "$builds_pid" ] || kill -- -"$builds_pid" 2>/dev/null || true' EXIT
fi
stage krew-test m krew-test
stage unit m unit
stage e2e-api m e2e-api
stage bench-smoke m bench-smoke
stage "builds beside (wait)" wait_builds
stage scale-smoke m scale-smoke
stage karpenter-smoke m karpenter-smoke
stage chart-test m chart-test
stage alerts-test m alerts-test
stage image m image
stage vitals-arm64 m vitals-arm64
stage vitals-v1 m vitals-v1
stage vitals-v2 m vitals-v2
stage e2e-node m e2e-node
table
echo "stages: ${#names[@]} passed, 0 failed"
