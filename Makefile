# runnerguard. `make test` is the one command CI and newcomers run: it
# installs what it needs (Debian packages, Go tools, the Kubernetes binaries
# it builds from the Go module proxy) and caches them under .cache/.
SHELL := /bin/bash
CACHE := $(CURDIR)/.cache
KUBE_VERSION := v1.37.2
KUBE_BIN := $(CACHE)/kube/$(KUBE_VERSION)/bin
export PATH := $(CACHE)/bin:$(PATH)

.PHONY: test unit lint drift e2e-api kube-bin tools chart-test alerts-test manifests image vitals-arm64 workflow-lint krew-test release vitals-v1 vitals-v2 node-deps cluster-up cluster-install cluster-down e2e-node demo
test: lint drift workflow-lint krew-test unit e2e-api bench-smoke scale-smoke chart-test alerts-test image vitals-arm64 vitals-v1 vitals-v2 e2e-node

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

unit:
	go test ./...

# What is written twice, checked in seconds before the slow suites: the
# chart's rendered config equals the built-in defaults, its webhook
# configurations and admission policy equal e2e/internal/registration's (the
# suites register those), manifests/ is the chart rendered. Helm only.
drift:
	hack/tools.sh helm helm3
	HELM=$(CACHE)/bin/helm HELM3=$(CACHE)/bin/helm3 go test -count=1 \
	  -run 'TestConfigFromValues|TestWebhookConfigurationsEqualRegistration|TestPolicyEqualsRegistration|TestManifestsAreInSyncWithTheChart' ./e2e/chart/

kube-bin:
	hack/kube.sh etcd kube-apiserver kubectl

# The webhooks through a real kube-apiserver and etcd built from source.
e2e-api: kube-bin
	KUBEBUILDER_ASSETS=$(KUBE_BIN) go test -tags e2e -count=1 -timeout 20m ./e2e/api/...

# Helm 4, Helm 3 (as helm3) and crane, built from the Go module proxy into
# .cache/bin once.
tools:
	hack/tools.sh

# The chart with both Helm versions: lint --strict, renders per option,
# schema refusals, equality with e2e/internal/registration, manifests in sync,
# and every rendered object through a real kube-apiserver with
# cert-manager's CRDs.
chart-test: kube-bin
	hack/tools.sh helm helm3
	HELM=$(CACHE)/bin/helm HELM3=$(CACHE)/bin/helm3 KUBEBUILDER_ASSETS=$(KUBE_BIN) \
	  go test -count=1 -timeout 15m ./e2e/chart/...

# The chart's alerts under `promtool test rules` (e2e/alerts/testdata: series
# that fire each alert and series that must not), its dashboard ConfigMap,
# and every PromQL query of both parsed and checked to name only metrics the
# binary serves. e2e/alerts is its own module (Prometheus's parser stays out
# of runnerguard's go.mod); promtool is built by hack/tools.sh.
alerts-test:
	hack/tools.sh helm promtool
	cd e2e/alerts && go vet ./... && HELM=$(CACHE)/bin/helm PROMTOOL=$(CACHE)/bin/promtool go test -count=1 ./...

# manifests/runnerguard.yaml: the chart rendered with defaults, for users
# who apply plain YAML. chart-test fails when it is stale.
manifests:
	hack/tools.sh helm
	$(CACHE)/bin/helm template runnerguard charts/runnerguard --namespace runnerguard > manifests/runnerguard.yaml.tmp
	mv manifests/runnerguard.yaml.tmp manifests/runnerguard.yaml

# The image without a Docker engine, for linux/amd64 and linux/arm64 as one
# OCI index, reproducible (same commit, same digest), checked: the index
# lists both platforms, each with its config, files and binaries. Kept as an
# OCI layout in .cache/images/runnerguard/ (digest in runnerguard.digest).
image:
	hack/image.sh

# The image's arm64 vitals sidecar under qemu user-mode emulation
# (hack/qemu-user.sh installs Debian's qemu-user-static) on the cgroup test
# trees: what an arm64 node runs in every runner pod. About 10 s.
vitals-arm64: image
	hack/qemu-user.sh
	VITALS_BIN=$(CACHE)/images/linux-arm64/vitals go test -tags emulated -count=1 -v -run TestVitalsArm64 ./cmd/vitals/

# The release workflow through actionlint (built from the Go module proxy).
workflow-lint:
	hack/tools.sh actionlint
	$(CACHE)/bin/actionlint .github/workflows/*.yml

# The kubectl plugin's release archives (hack/plugin.sh, one per platform
# the krew manifest template names) built twice to the same bytes, the
# template rendered as krew-release-bot renders it against them (the same
# archives, matching checksums, each selector's platform in its binary's
# header), and this machine's archive run, also through a real kubectl.
krew-test: kube-bin
	go vet -tags krew ./e2e/krew/
	KUBECTL=$(KUBE_BIN)/kubectl go test -tags krew -count=1 -timeout 20m ./e2e/krew/

# Publishes the image index and the chart (its image pinned by digest) to
# any OCI registry: make release REGISTRY=ghcr.io/OWNER. The node suite and
# the demo run it against the cluster's loopback registry.
release:
	hack/release.sh

# The vitals sidecar on this machine's cgroup v1 memory hierarchy (as root;
# skipped where there is none): the built binary on a pod-shaped cgroup
# whose container dd the kernel OOM-kills; then the readers' cost per
# sample on the testdata trees and on a real v1 cgroup.
vitals-v1:
	go test -tags cgroupv1 -count=1 -v -run TestOOMKillV1 ./cmd/vitals/
	go test -tags cgroupv1 -count=1 -run '^$$' -bench . -benchtime 2000x ./vitals/cgroup/

# The vitals sidecar on a real cgroup v2 kernel: hack/qemu-v2.sh installs
# qemu-system-x86 and busybox-static, caches a Debian cloud kernel under
# .cache/qemu/ and boots it with the static sidecar in the initramfs.
vitals-v2:
	go test -tags qemu -count=1 -v -timeout 10m -run TestOOMKillV2 ./cmd/vitals/

# A one-node cluster on this machine (root): etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and a kubelet built from source,
# containerd, runc and the CNI bridge from Debian, cert-manager's real
# controllers (e2e/certmanager). State under .cache/cluster; the first run
# builds for about half an hour, a warm one starts in well under a minute.
node-deps:
	hack/node-deps.sh

cluster-up: node-deps
	go run ./e2e/cluster up

# runnerguard released to the cluster's loopback registry (hack/release.sh)
# and the chart installed from it with Helm; cert-manager issues its
# certificates.
cluster-install: node-deps
	go run ./e2e/cluster install

cluster-down:
	go run ./e2e/cluster down

# The node scenarios: real runner stand-ins under the real kubelet, the
# webhook as pods behind its Service. Brings the cluster up and tears it
# down (KEEP_CLUSTER=1 keeps it).
e2e-node: node-deps
	hack/node-e2e.sh

# The newcomer's tour: cluster up, chart in, a short story, teardown.
demo: node-deps
	hack/demo.sh

# What runnerguard costs, in one table at the end (.cache/bench/report.txt):
# the handler benchmarks; pod CREATE and DELETE latency through the real
# kube-apiserver with and without the webhooks, against the guard's rule as
# a ValidatingAdmissionPolicy, with the webhook calls per operation; pod
# CREATE and UPDATE with and without the chart's policy on who may write
# the guard's signals; the webhook server alone under concurrent reviews
# over TLS; the vitals sidecar's figures from vitals-v1. A few minutes; not part of test.
# LOAD_ROUNDS (default 300) sets the timed requests per setup.
.PHONY: bench
bench: kube-bin
	@mkdir -p $(CACHE)/bench
	set -o pipefail; go test -run '^$$' -bench . -benchmem -count 5 -benchtime 2000x ./webhook/guard/ ./webhook/inject/ | tee $(CACHE)/bench/handler.txt
	set -o pipefail; go test -run '^$$' -bench 'CacheMemory|LeaderCache' -benchtime 1x ./internal/recorder/ | tee $(CACHE)/bench/watch.txt
	-$(MAKE) --no-print-directory vitals-v1 > $(CACHE)/bench/vitals-v1.txt 2>&1
	go test -c -tags load -o $(CACHE)/bench/load.test ./e2e/load/
	set -o pipefail; cd e2e/load && LOAD_MICRO=$(CACHE)/bench/handler.txt LOAD_VITALS=$(CACHE)/bench/vitals-v1.txt \
	  KUBEBUILDER_ASSETS=$(KUBE_BIN) $(CACHE)/bench/load.test -test.count=1 -test.timeout=20m \
	  2> $(CACHE)/bench/load.log | tee $(CACHE)/bench/report.txt || { tail -20 $(CACHE)/bench/load.log; exit 1; }

# A short run of the load harness (3 rounds, 100 ms steps) so it keeps
# working; its figures mean nothing. Part of test (about 30 s).
.PHONY: bench-smoke
bench-smoke: kube-bin
	LOAD_ROUNDS=3 LOAD_STEP_MS=100 KUBEBUILDER_ASSETS=$(KUBE_BIN) go test -tags load -count=1 -timeout 5m ./e2e/load/

# The API's deep copies and CRDs, from api/v1alpha1 with controller-gen (built
# from the Go module proxy). The CRDs go into the chart's templates; lint
# fails when they are stale. Helm keeps them on uninstall (resource-policy
# keep), so the records outlive the release.
CONTROLLER_GEN := go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
.PHONY: generate
generate:
	$(CONTROLLER_GEN) object paths=./api/... crd:crdVersions=v1 output:crd:dir=charts/runnerguard/templates/crds

# Fleet scale (issue 18): the real kube-apiserver and etcd,
# kube-controller-manager's namespace, pod GC and garbage collector
# controllers, runnerguard as two leader-electing replicas, kwok
# (hack/tools.sh) playing the kubelet of simulated Nodes through e2e/scale/testdata/stages.yaml, and a simulator
# that bursts runner pods in, kills them the ways fleets do and scores the
# death records; prints the report (README "Fleet scale"), kept in
# e2e/.artifacts/scale-report-N.txt. SCALE_RUNNERS (default 200) and
# SCALE_NODES (default 100) set the size; SCALE_OTHER_PODS (default 0) other
# pods run in the cluster first; the same simulation runs once without
# runnerguard (the baseline) before it is installed. Not part of test.
.PHONY: scale scale-smoke
SCALE_RUNNERS ?= 200
SCALE_NODES ?= 100
SCALE_OTHER_PODS ?= 0
scale: kube-bin
	hack/tools.sh kwok
	hack/kube.sh kube-controller-manager
	KWOK=$(CACHE)/bin/kwok SCALE_RUNNERS=$(SCALE_RUNNERS) SCALE_NODES=$(SCALE_NODES) SCALE_OTHER_PODS=$(SCALE_OTHER_PODS) \
	  KUBEBUILDER_ASSETS=$(KUBE_BIN) go test -tags scale -count=1 -v -run TestFleet -timeout 180m ./e2e/scale/

# The same at 30 runner pods on 10 nodes among 200 other pods, baseline
# included: every death recorded exactly once across the leader kill, with
# its class while retention removes all but 5 records a namespace, no busy
# runner lost, and every kill path (namespace deletion,
# pod GC, autoscaler, ARC). Part of test (about 80 s warm, 40 s of it pod
# GC's quarantine).
scale-smoke: kube-bin
	hack/tools.sh kwok
	hack/kube.sh kube-controller-manager
	KWOK=$(CACHE)/bin/kwok SCALE_RUNNERS=30 SCALE_NODES=10 SCALE_OTHER_PODS=200 SCALE_RECORDS_PER_NAMESPACE=5 KUBEBUILDER_ASSETS=$(KUBE_BIN) \
	  go test -tags scale -count=1 -v -run TestFleet -timeout 15m ./e2e/scale/
