#!/bin/sh
# The runner stand-in: a CI runner's process, in each of the ways runners
# die on a real node. It runs in a real container (busybox-static), under
# the kubelet, with the pod's real memory limit.
#
#   runner.sh job SECONDS [EXIT]  run a job for SECONDS, then exit EXIT (0)
#   runner.sh oom SIZE [AFTER]    after a job step of AFTER seconds (0), the
#                                 runner itself allocates SIZE at once (dd
#                                 bs=SIZE): the kernel OOM-kills it
#   runner.sh child-oom SIZE      a step of the job allocates SIZE and is
#                                 OOM-killed; the runner reports success
#   runner.sh segfault            the runner crashes with SIGSEGV (139)
#   runner.sh build [SIZE]        GitLab's build container: a shell that
#                                 ignores SIGTERM and waits for the runner
#                                 manager's next step, after an optional step
#                                 that allocates SIZE and is OOM-killed; it
#                                 ends only by SIGKILL (the pod's deletion or
#                                 its activeDeadlineSeconds)
set -u
say() { echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) runner: $*"; }

# A graceful stop (pod deletion, drain) ends the job: exit as a shell does
# on SIGTERM.
trap 'say "received SIGTERM, job cancelled"; exit 143' TERM

mode=${1:-job}
say "runner started, mode $mode, job assigned"
# The files the vitals sidecar shares with the runner, if it is there.
[ -r /runnerguard/vitals/memory.events ] && say "vitals: $(tr '\n' ' ' < /runnerguard/vitals/memory.events)"
case "$mode" in
  job)
    seconds=${2:-30} code=${3:-0}
    say "running job for ${seconds}s"
    # In the background, so the TERM trap runs at once.
    sleep "$seconds" & wait $!
    say "job finished, exiting $code"
    exit "$code"
    ;;
  oom)
    sleep "${3:-0}" & wait $!
    say "allocating ${2:?size}"
    exec dd if=/dev/zero of=/dev/null bs="$2" count=1
    ;;
  child-oom)
    say "step allocates ${2:?size}"
    dd if=/dev/zero of=/dev/null bs="$2" count=1
    say "step ended with $?; job reported as succeeded"
    # The sidecar notices the kill within its interval; a job's next step
    # would read the files then.
    sleep 2
    [ -r /runnerguard/vitals/memory.events ] && say "vitals: $(tr '\n' ' ' < /runnerguard/vitals/memory.events)"
    exit 0
    ;;
  build)
    trap '' TERM
    if [ -n "${2:-}" ]; then
      say "step allocates $2"
      dd if=/dev/zero of=/dev/null bs="$2" count=1
      say "step ended with $?"
    fi
    say "step done; waiting for the next, as a shell on its stdin"
    while :; do sleep 3600 & wait $!; done
    ;;
  segfault)
    sleep 1
    say "crashing"
    ulimit -c 0
    # The process that faults must not be the container's init: init
    # ignores signals it has no handler for.
    sh -c 'kill -SEGV $$'
    exit $?
    ;;
  *)
    say "unknown mode $mode"
    exit 2
    ;;
esac
