#!/usr/bin/env bash
# `make test`: every stage in order, each timed, with a table of the stage
# times at the end (and at the first failure, which stops the run).
#
# The builds that only the later stages need (the node's control plane and
# kubelet, containerd, cert-manager's controllers, the node's images, kwok,
# Karpenter's provider, promtool and crane) run in the background beside
# the first suites, whose waits on the API server leave a core idle: on a
# cold machine they are most of the run. Their log is .cache/test-builds.log.
# A stage that needs them waits for them first, so no build runs twice.
# Usage: hack/test.sh   (make test runs it; TEST_SERIAL=1 builds in line)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p .cache

names=() secs=()
start=$SECONDS
table() {
  echo
  echo ">> make test: stage times"
  local i
  for i in "${!names[@]}"; do printf '   %-26s %5ds\n' "${names[$i]}" "${secs[$i]}"; done
  printf '   %-26s %5ds\n' "total" "$((SECONDS - start))"
}

# stage NAME COMMAND...: runs it, timed; a failure prints the table and ends
# the run.
stage() {
  local name=$1 t=$SECONDS
  shift
  echo ">> stage $name"
  if ! "$@"; then
    local passed=${#names[@]}
    names+=("$name (FAILED)") secs+=($((SECONDS - t)))
    table
    echo "stages: $passed passed, 1 failed"
    exit 1
  fi
  names+=("$name") secs+=($((SECONDS - t)))
}

m() { make --no-print-directory "$@"; }

# The later stages' builds, in the order the stages need them; run as
# `hack/test.sh --builds` in a session of its own, so that a failed run ends
# them whole.
builds() {
  hack/node-deps.sh
  hack/tools.sh kwok promtool crane
  hack/karpenter.sh >/dev/null
}
if [ "${1:-}" = --builds ]; then
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
if [ "${TEST_SERIAL:-}" = 1 ]; then
  stage builds builds
else
  setsid "$0" --builds > .cache/test-builds.log 2>&1 < /dev/null &
  builds_pid=$!
  trap '[ -n "$waited" ] || [ -z "$builds_pid" ] || kill -- -"$builds_pid" 2>/dev/null || true' EXIT
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
