#!/usr/bin/env bash
# `make test`: every stage, each timed (wall and CPU seconds), with a table
# of the stage times at the end (and at the first failure, which stops the
# run).
#
# After the first two stages (the chart's README, and runnerguard's
# libraries compiled), the stages run in two lanes side by side, since most
# suites wait on API servers and leave a core idle:
# - this process runs lint, checks the chart against the code (drift, Helm
#   4 and 3) and the release workflow, runs the sidecar's and the alerts'
#   suites, which need no Kubernetes binary, waits for the lane's
#   kube-apiserver, then runs the plugin's, the unit tests, the benchmarks,
#   the chart's, Karpenter's and the fleet simulation;
# - the lane beside (`hack/test.sh --lane`, a session of its own, so that a
#   failed run ends it whole) builds kube-apiserver, etcd, kubectl and
#   crane, then runs the API-server suite beside the builds of the node's
#   control plane, kubelet, cert-manager's controllers and images, then
#   the node suite, the longest (its release builds and checks the image,
#   this machine's platform).
# What both lanes need (kube-controller-manager) is built by whichever asks
# first, under a lock, so never twice. Every stage's modules are
# downloaded beside the first stages at once, at a lower priority
# (.cache/test-early.log).
# The lane's output is .cache/test-lane.log, printed when it fails; its
# times are rows of the table. A failure in either lane stops the run.
# The CPU column is the user and system time of the stage's processes once
# they have ended.
# Usage: hack/test.sh   (make test runs it; TEST_SERIAL=1 runs the lane's
# stages after this one's, in this process)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p .cache
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
lane_times=.cache/test-lane.times
lane_log=.cache/test-lane.log

# cpu_mark sets cpu to the CPU seconds this shell's ended children have
# used so far. `times` runs in this shell (a redirect, no subshell): a
# forked shell would count only its own children.
cpu=0
cpu_mark() {
  times > "$times_file"
  cpu=$(awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$times_file")
}

# In the lane, a row goes to $lane_times (name|wall|cpu); here, to the
# table's arrays.
in_lane=
names=() secs=() cpus=()
row() {
  if [ -n "$in_lane" ]; then
    echo "$1|$2|$3" >> "$lane_times"
  else
    names+=("$1") secs+=("$2") cpus+=("$3")
  fi
}

start=$SECONDS
table() {
  echo
  echo ">> make test: stage times (wall and CPU seconds)"
  local i
  for i in "${!names[@]}"; do printf '   %-28s %5ds %6ds\n' "${names[$i]}" "${secs[$i]}" "${cpus[$i]}"; done
  cpu_mark
  printf '   %-28s %5ds %6ds\n' "total" "$((SECONDS - start))" "$cpu"
  if [ -s "$lane_times" ]; then
    echo ">> the lane beside (wall and CPU seconds; its CPU is in the total once it ended)"
    awk -F'|' '{ printf "   %-28s %5ds %6ds\n", $1, $2, $3 }' "$lane_times"
  fi
}

# stage NAME COMMAND...: runs it, timed. A failure ends the lane it is in;
# here it prints the table and ends the run.
stage() {
  local name=$1 t=$SECONDS c
  shift
  echo ">> stage $name"
  cpu_mark
  c=$cpu
  if ! "$@"; then
    cpu_mark
    row "$name (FAILED)" $((SECONDS - t)) $((cpu - c))
    [ -z "$in_lane" ] || exit 1
    fail "$name"
  fi
  cpu_mark
  row "$name" $((SECONDS - t)) $((cpu - c))
  [ -n "$in_lane" ] || lane_check
}

m() { make --no-print-directory "$@"; }

# The lane beside starts with kube-apiserver, etcd, kubectl and crane, which
# both lanes need, and marks them built ($kube_ready) for this one; then
# the node suite, the longest, after the builds it needs; then the fleet
# simulation.
kube_ready=.cache/test-lane.kube-bin
lane_kube() {
  stage kube-bin kube_bin
  touch "$kube_ready"
}
kube_bin() { m kube-bin && hack/tools.sh crane; }
# e2e-api runs beside the node's builds, in a process of its own: it
# mostly waits on its API server, they compile (in the other lane it left
# that lane far the longer: docs/development/README.md, Test time). Its
# rows and its output are the lane's; the node suite starts once it has
# passed.
lane_rest() {
  local api=
  if [ -n "$in_lane" ]; then
    stage e2e-api m e2e-api &
    api=$!
    # Should a build below fail, the lane ends, and the suite beside it
    # with it (this lane is its own process group): this run's cleanup
    # kills the group only while the lane still runs.
    trap 'kill -- -$$ 2>/dev/null || true' EXIT
  else
    stage e2e-api m e2e-api
  fi
  stage "build kcm,scheduler,kubelet" hack/kube.sh kube-controller-manager kube-scheduler kubelet
  stage "build node-deps" hack/node-deps.sh
  if [ -n "$api" ]; then
    wait "$api" || exit 1
    trap - EXIT
  fi
  stage e2e-node m e2e-node
}
early() {
  local d
  for d in . hack/tools e2e/certmanager e2e/alerts; do (cd "$d" && go mod download) || true; done
}
if [ "${1:-}" = --early ]; then
  early
  exit
fi
if [ "${1:-}" = --lane ]; then
  in_lane=1
  lane_kube
  lane_rest
  exit
fi

lane_pid=
lane_done=
lane_status=0
# lane_check ends the run if the lane beside has failed; quiet while it
# runs or once it passed.
lane_check() {
  [ -n "$lane_pid" ] || return 0
  [ -n "$lane_done" ] || ! kill -0 "$lane_pid" 2>/dev/null || return 0
  lane_wait || fail "the lane beside"
}
# lane_wait waits for the lane to end and returns its status (again, if
# it ended before), printing the end of its log when it failed.
lane_wait() {
  [ -n "$lane_pid" ] || return 0
  if [ -z "$lane_done" ]; then
    lane_done=1
    wait "$lane_pid" || lane_status=$?
    if [ "$lane_status" != 0 ]; then
      echo ">> the lane beside failed; the end of $lane_log:"
      tail -n 400 "$lane_log"
    fi
  fi
  return "$lane_status"
}
# kube_wait waits for the lane's kube-bin, or its failure.
kube_wait() {
  until [ -e "$kube_ready" ]; do
    kill -0 "$lane_pid" 2>/dev/null || { lane_wait && [ -e "$kube_ready" ]; return; }
    sleep 1
  done
}
fail() {
  local passed=${#names[@]}
  table
  echo "stages: $passed passed here, 1 failed ($1)"
  exit 1
}

rm -f "$lane_times" "$kube_ready"
# Every stage's modules, downloaded at once beside the first stages at a
# lower priority (a build fetches what it lacks one module at a time, as it
# finds them). Nothing is compiled here: two go commands compiling the same
# package at once each compile it (the build cache shares only what is
# done), and on 2 cores that cost more than it overlapped (a cold run of
# 2026-11-28, docs/development/README.md).
setsid nice -n 10 "$0" --early > .cache/test-early.log 2>&1 < /dev/null &
early_pid=$!
cleanup() {
  rm -f "$times_file"
  kill -- -"$early_pid" 2>/dev/null || true
  [ -n "$lane_done" ] || [ -z "$lane_pid" ] || kill -- -"$lane_pid" 2>/dev/null || true
}
trap cleanup EXIT

stage chart-docs-check m chart-docs-check
# runnerguard's packages and the libraries under them, compiled (not
# linked) into the build cache: most of what the lane's kube-apiserver and
# drift's Helm builds compile too. The lane starts once they are there, so
# that nothing is compiled twice at once, and lint's go vet (the test
# packages and vet's own pass over every package) runs beside it.
stage libraries m libraries
if [ "${TEST_SERIAL:-}" != 1 ]; then
  setsid "$0" --lane > "$lane_log" 2>&1 < /dev/null &
  lane_pid=$!
fi
stage lint m lint
stage drift m drift
stage workflow-lint m workflow-lint
# What needs no Kubernetes binary, while the lane builds them, rather
# than waiting idle for kube-apiserver (docs/development/README.md).
stage vitals-arm64 m vitals-arm64
stage vitals-v1 m vitals-v1
stage vitals-v2 m vitals-v2
stage "build promtool" hack/tools.sh promtool
stage alerts-test m alerts-test
if [ "${TEST_SERIAL:-}" = 1 ]; then
  lane_kube
else
  stage "kube-bin (wait)" kube_wait
fi
stage krew-test m krew-test
stage unit m unit
stage bench-smoke m bench-smoke
stage chart-test m chart-test
stage "build karpenter-kwok" hack/karpenter.sh
stage karpenter-smoke m karpenter-smoke
stage "build kwok" hack/tools.sh kwok
stage scale-smoke m scale-smoke
if [ "${TEST_SERIAL:-}" = 1 ]; then
  lane_rest
else
  stage "lane beside (wait)" lane_wait
  grep -E '^(ok|PASS|--- SKIP)' "$lane_log" | sed 's/^/   lane: /' || true
fi
table
echo "stages: ${#names[@]} passed, 0 failed"
