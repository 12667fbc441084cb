# runnerguard. `make test` is the one command CI and newcomers run: it
# installs what it needs (Debian packages, Go tools, the Kubernetes binaries
# it builds from the Go module proxy) and caches them under .cache/.
SHELL := /bin/bash
CACHE := $(CURDIR)/.cache
KUBE_VERSION := v1.37.2
KUBE_BIN := $(CACHE)/kube/$(KUBE_VERSION)/bin
export PATH := $(CACHE)/bin:$(PATH)

.PHONY: test unit lint e2e-api kube-bin
test: lint unit e2e-api

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...

unit:
	go test ./...

kube-bin:
	hack/kube.sh etcd kube-apiserver

# The webhooks through a real kube-apiserver and etcd built from source.
e2e-api: kube-bin
	KUBEBUILDER_ASSETS=$(KUBE_BIN) go test -tags e2e -count=1 -timeout 20m ./e2e/api/...
