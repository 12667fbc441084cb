#!/usr/bin/env bash
# make demo: a one-node cluster on this machine, cert-manager and the chart
# installed for real from an OCI registry on loopback, and a short story
# told with the kubectl commands an operator would type: a busy runner
# survives a reaper, an OOM death is recorded with its evidence, a
# deliberate drain goes through. Then the cluster is torn down
# (KEEP_CLUSTER=1 keeps it; KUBECONFIG is printed).
# Usage: hack/demo.sh   (after hack/node-deps.sh; make demo does both)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export KUBECONFIG="$root/.cache/cluster/admin.kubeconfig"
kubectl() { "$root/.cache/kube/v1.37.2/bin/kubectl" "$@"; }
node=runnerguard-node
reaper=system:serviceaccount:ci-infra:orphan-reaper

bold() { printf '\n\033[1m%s\033[0m\n' "$*"; }
# show prints a command as typed, then runs it with its output indented;
# a command expected to fail is prefixed with "!".
show() {
  local expect_fail=
  if [ "$1" = "!" ]; then expect_fail=1; shift; fi
  printf '\033[2m$ %s\033[0m\n' "$*"
  if "$@" > /tmp/runnerguard-demo.out 2>&1; then
    sed 's/^/  /' /tmp/runnerguard-demo.out
  else
    sed 's/^/  /' /tmp/runnerguard-demo.out
    [ -n "$expect_fail" ] || return 1
  fi
}
runner() { # runner NAME MEMORY ARGS...
  local name=$1 memory=$2; shift 2
  local args; args=$(printf '"%s",' "$@")
  kubectl apply -n demo -f - > /dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $name, labels: {app: demo-runner}}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 5
  containers:
    - name: runner
      image: runnerguard.local/e2e/runner:1
      imagePullPolicy: Never
      args: [${args%,}]
      resources: {limits: {memory: $memory}}
YAML
}

if [ "${KEEP_CLUSTER:-}" != 1 ]; then
  trap 'bold "Tearing the cluster down"; go run ./e2e/cluster down' EXIT
fi
bold "Starting a one-node cluster (kubelet, containerd, cert-manager) under .cache/cluster"
go run ./e2e/cluster up
bold "Releasing runnerguard to the cluster's registry (make release REGISTRY=127.0.0.1:PORT) and installing the chart from it with Helm; cert-manager issues the webhook's certificate"
go run ./e2e/cluster install
show kubectl get pods -n runnerguard -o wide
show kubectl get certificates -n runnerguard

bold "1. A runner picks up a job in a namespace that opted in"
kubectl create namespace demo > /dev/null
kubectl label namespace demo runnerguard.io/enabled=true > /dev/null
# The fleet's cleanup worker: a ServiceAccount allowed to delete pods.
kubectl apply -f - > /dev/null <<'YAML'
apiVersion: v1
kind: Namespace
metadata: {name: ci-infra}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: orphan-reaper, namespace: ci-infra}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: orphan-reaper}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list, delete]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: orphan-reaper}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: orphan-reaper}
subjects: [{kind: ServiceAccount, name: orphan-reaper, namespace: ci-infra}]
YAML
runner runner-1 64Mi job 25
kubectl wait -n demo --for=condition=Ready pod/runner-1 --timeout=60s > /dev/null
show kubectl get pod -n demo runner-1 -o 'jsonpath={"init containers (vitals sidecar): "}{.spec.initContainers[*].name}{"\nrunner env: "}{.spec.containers[0].env[*].name}{"\n"}'

bold "2. The fleet's orphan reaper deletes it mid-job: refused"
show ! kubectl delete pod -n demo runner-1 --as="$reaper" --wait=false
sleep 1
show kubectl get events -n demo --field-selector involvedObject.name=runner-1,type=Warning

bold "3. The job finishes undisturbed"
kubectl wait -n demo --for=jsonpath='{.status.phase}'=Succeeded pod/runner-1 --timeout=90s > /dev/null
show kubectl logs -n demo runner-1 -c runner

bold "4. A job step allocates past the runner's 64Mi limit: the kernel kills it, the runner exits 0"
runner runner-2 64Mi child-oom 200M
kubectl wait -n demo --for=jsonpath='{.status.phase}'=Succeeded pod/runner-2 --timeout=90s > /dev/null
show kubectl logs -n demo runner-2 -c runner
show kubectl get pod -n demo runner-2 -o 'jsonpath={range .status.containerStatuses[*]}{.name}: {.state.terminated.reason}, exit code {.state.terminated.exitCode}{"\n"}{end}'
show kubectl logs -n demo runner-2 -c runnerguard-vitals --tail=1
for _ in $(seq 40); do  # the kubelet stops the sidecar after the runner
  msg=$(kubectl get pod -n demo runner-2 -o 'jsonpath={.status.initContainerStatuses[0].state.terminated.message}')
  [ -z "$msg" ] || break
  sleep 0.5
done
show kubectl get pod -n demo runner-2 -o 'jsonpath={"the sidecar'"'"'s final reading: "}{.status.initContainerStatuses[0].state.terminated.message}{"\n"}'

bold "5. The runner's death is on record, and outlives its pod: the fleet removes it"
# The operator's CLI, as a kubectl plugin: kubectl finds kubectl-runnerguard
# on PATH.
plugins=$(mktemp -d)
go build -C "$root" -o "$plugins/kubectl-runnerguard" ./cmd/runnerguard
export PATH="$plugins:$PATH"
uid=$(kubectl get pod -n demo runner-2 -o jsonpath='{.metadata.uid}')
for _ in $(seq 60); do  # the watcher records it once the sidecar's final reading is in
  [ -n "$(kubectl get runnerdeaths -n demo -l "runnerguard.io/pod-uid=$uid" -o name 2>/dev/null)" ] && break
  sleep 0.5
done
show kubectl get runnerdeaths -n demo
show kubectl delete pod -n demo runner-2 --as="$reaper"
show kubectl runnerguard why runner-2 -n demo

bold "6. A deliberate drain: it waits for the busy runner (429, retried)..."
runner runner-3 64Mi job 300
kubectl wait -n demo --for=condition=Ready pod/runner-3 --timeout=60s > /dev/null
# The webhook's own pods share this one node: drain the runners only. The
# demo's runner pods have no controller, hence --force (still evictions);
# the vitals sidecar's emptyDir is local storage, hence --delete-emptydir-data.
show ! kubectl drain "$node" --pod-selector=app=demo-runner --force --delete-emptydir-data --timeout=12s
bold "...until the operator sets the override: then it proceeds at once"
show kubectl annotate pod -n demo runner-3 runnerguard.io/allow-delete="node maintenance"
show kubectl drain "$node" --pod-selector=app=demo-runner --force --delete-emptydir-data --timeout=60s
show kubectl get events -n demo --field-selector involvedObject.name=runner-3
kubectl uncordon "$node" > /dev/null

bold "Done. Where to look on your own cluster:"
cat <<'TXT'
  kubectl get events -A --field-selector type=Warning      refused deletes and who tried
  kubectl get runnerdeaths -A                              every runner death, kept for days
  kubectl runnerguard why <pod> -n <namespace>             how one runner died, even after its pod is gone
  kubectl runnerguard deaths -A --since 168h               what kills your runners this week
  kubectl logs <runner-pod> -c runnerguard-vitals          the memory cgroup, one JSON line a tick
TXT
