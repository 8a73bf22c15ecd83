# Every target works on a fresh machine with nothing but Go 1.26 installed.
SHELL := /usr/bin/env bash
GO ?= go
STATICCHECK_VERSION ?= v0.8.2
CONTROLLER_GEN_VERSION ?= v0.23.0
BIN := $(CURDIR)/bin
# Every module of the workspace (go.work): the root module and the providers with their own go.mod.
MODULE_DIRS = $(shell $(GO) list -m -f '{{.Dir}}')
# Modules outside the workspace, built and tested on their own (GOWORK=off): a test-only dependency
# there cannot raise the versions the library is built with (config/prometheus/rules: Prometheus'
# own rule parser, which requires newer Kubernetes and Prometheus client libraries).
STANDALONE_DIRS = config/prometheus/rules
# Extra flags for `go test`, e.g. TEST_FLAGS='-run TestFoo -v'.
TEST_FLAGS ?=
BENCH ?= .
# The benchmarks drive real API servers; one iteration each gives their figures.
BENCHTIME ?= 1x

.PHONY: all test lint bench bench-fleet demo envtest-assets staticcheck controller-gen generate verify-generate docs docs-check plots

all: lint test

## envtest-assets: build (or reuse) kube-apiserver and etcd for the tests and print their directory.
envtest-assets:
	@hack/envtest-assets.sh

## test: provision the control-plane binaries, then run every module's tests with the race detector.
test:
	@assets="$$(hack/envtest-assets.sh)"; export KUBEBUILDER_ASSETS="$$assets"; \
	fail=0; for dir in $(MODULE_DIRS); do \
		echo "==> go test $$dir"; \
		(cd "$$dir" && $(GO) test -race -count=1 -timeout 30m $(TEST_FLAGS) ./...) || fail=1; \
	done; \
	for dir in $(STANDALONE_DIRS); do \
		echo "==> go test $$dir (GOWORK=off)"; \
		(cd "$$dir" && GOWORK=off $(GO) test -race -count=1 -timeout 30m $(TEST_FLAGS) ./...) || fail=1; \
	done; exit $$fail

## lint: gofmt, go vet and staticcheck on every module; generated code and the book's snippets and links.
lint: staticcheck docs-check
	@$(MAKE) --no-print-directory verify-generate
	@unformatted="$$(gofmt -l $(MODULE_DIRS))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@fail=0; for dir in $(MODULE_DIRS); do \
		echo "==> vet + staticcheck $$dir"; \
		(cd "$$dir" && $(GO) vet ./... && $(BIN)/staticcheck ./...) || fail=1; \
	done; \
	for dir in $(STANDALONE_DIRS); do \
		echo "==> vet + staticcheck $$dir (GOWORK=off)"; \
		(cd "$$dir" && GOWORK=off $(GO) vet ./... && GOWORK=off $(BIN)/staticcheck ./...) || fail=1; \
	done; exit $$fail

staticcheck: $(BIN)/staticcheck-$(STATICCHECK_VERSION)
$(BIN)/staticcheck-$(STATICCHECK_VERSION):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) GOWORK=off $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@touch $@

# Generated from the ClusterProfile API types: deepcopy functions and the CRD.
INVENTORY_API := providers/cluster-inventory-api
GENERATE_ARGS = object paths=./$(INVENTORY_API)/apis/... crd paths=./$(INVENTORY_API)/apis/...

## generate: regenerate the ClusterProfile deepcopy functions and CRD with the pinned controller-gen,
## and the compatibility modules (compat/) from the library's API.
generate: controller-gen
	$(BIN)/controller-gen $(GENERATE_ARGS) output:crd:dir=$(INVENTORY_API)/config/crd
	cd compat && $(GO) generate ./...

## verify-generate: fail when the checked-in generated files differ from what `make generate` writes.
verify-generate: controller-gen
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	$(BIN)/controller-gen $(GENERATE_ARGS) output:object:dir="$$tmp" output:crd:dir="$$tmp" || exit 1; \
	diff -u $(INVENTORY_API)/apis/v1alpha1/zz_generated.deepcopy.go "$$tmp/zz_generated.deepcopy.go" && \
	diff -u $(INVENTORY_API)/config/crd/multicluster.x-k8s.io_clusterprofiles.yaml "$$tmp/multicluster.x-k8s.io_clusterprofiles.yaml" || \
	{ echo "generated files are out of date: run make generate"; exit 1; }

controller-gen: $(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
$(BIN)/controller-gen-$(CONTROLLER_GEN_VERSION):
	@mkdir -p $(BIN)
	GOBIN=$(BIN) GOWORK=off $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	@touch $@

## bench: run every benchmark once (figures are printed; nothing is asserted on time).
bench:
	@assets="$$(hack/envtest-assets.sh)"; export KUBEBUILDER_ASSETS="$$assets"; \
	fail=0; for dir in $(MODULE_DIRS); do \
		echo "==> go test -bench $$dir"; \
		(cd "$$dir" && $(GO) test -run '^$$' -bench '$(BENCH)' -benchtime=$(BENCHTIME) -benchmem -count=1 ./...) || fail=1; \
	done; exit $$fail

# bench-fleet's simulated fleet (bench/fleetsim): members, rounds, the sides
# of BenchmarkFleet run in processes of their own, more fleetsim flags
# (e.g. FLEET_ARGS='-configmaps 20 -deployments 0'), and where the figures go.
FLEET_MEMBERS ?= 1000
FLEET_ROUNDS ?= 3
FLEET_SIDES ?= client-go,library,adopted-concurrent,controller-runtime,client-go-serial,adopted-serial
FLEET_ARGS ?=
FLEET_OUTPUT ?= docs/advanced/bench-fleet-output.txt
## bench-fleet: the scale benchmarks against a simulated fleet of distinct servers, CAs and identities (bench/fleetsim).
bench-fleet:
	@assets="$$(hack/envtest-assets.sh)" || exit 1; export KUBEBUILDER_ASSETS="$$assets"; mkdir -p $(BIN); \
	$(GO) test -c -o $(BIN)/bench.test ./bench && $(GO) build -o $(BIN)/fleetsim ./bench/fleetsim && \
	$(BIN)/fleetsim -members $(FLEET_MEMBERS) -rounds $(FLEET_ROUNDS) -sides $(FLEET_SIDES) -lifetime 3h \
		-drive $(BIN)/bench.test -out $(FLEET_OUTPUT) $(FLEET_ARGS)

## demo: the quickstart: a ConfigMap controller over a local fleet of real control planes (file provider).
demo:
	@assets="$$(hack/envtest-assets.sh)" || exit 1; export KUBEBUILDER_ASSETS="$$assets"; \
	$(GO) build -o $(BIN)/quickstart ./examples/quickstart && exec $(BIN)/quickstart -demo

## docs: refresh the Go snippets of the book (docs/) from their regions in examples/.
docs:
	@$(GO) run ./hack/docsnippets

## docs-check: fail when a snippet of the book differs from its source, or a link is broken.
docs-check:
	@$(GO) run ./hack/docsnippets -check

# Benchmark output the plots are drawn from: `make bench | tee $(BENCH_OUTPUT)` refreshes it.
BENCH_OUTPUT ?= docs/advanced/bench-output.txt
# Optional reference run of another revision on the same machine, as label=path
# (e.g. BENCH_REF=main@1a2b3c=/tmp/bench-main.txt): drawn beside this one.
BENCH_REF ?=
## plots: draw the book's benchmark plots (SVG) from $(BENCH_OUTPUT), $(FLEET_OUTPUT) and $(BENCH_REF).
plots:
	@cat $(BENCH_OUTPUT) $(wildcard $(FLEET_OUTPUT)) | $(GO) run ./hack/benchplot -in this=- $(if $(BENCH_REF),-in $(BENCH_REF)) -out docs/images
