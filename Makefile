# trainjob-operator — run `make help` for the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(abspath .)
BIN := $(ROOT)/bin
export PATH := $(BIN):$(PATH)

CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT := $(BIN)/golangci-lint

# The version and source revision stamped into the binaries, the image's
# labels and the release manifests. Between releases (tags v*), VERSION is
# v0.0.0-<commit>, with -dirty for uncommitted changes.
GIT_DESCRIBE := $(shell git describe --tags --always --dirty --match 'v[0-9]*' 2>/dev/null)
VERSION ?= $(if $(filter v%,$(GIT_DESCRIBE)),$(GIT_DESCRIBE),v0.0.0-$(or $(GIT_DESCRIBE),unknown))
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)$(shell git diff --quiet HEAD -- 2>/dev/null || echo -dirty)
export VERSION REVISION VERSION_LDFLAGS
VERSION_LDFLAGS := -X github.com/trainjob-operator/trainjob-operator/internal/version.version=$(VERSION) \
	-X github.com/trainjob-operator/trainjob-operator/internal/version.revision=$(REVISION)

# Test settings. envtest runs the real kube-apiserver and etcd from bin/.
export KUBEBUILDER_ASSETS := $(BIN)
GO_TEST_FLAGS ?= -count=1
INTEGRATION_TIMEOUT ?= 20m
E2E_TIMEOUT ?= 15m
E2E_KUEUE_TIMEOUT ?= 15m
E2E_MULTIKUEUE_TIMEOUT ?= 20m
E2E_PROMETHEUS_TIMEOUT ?= 10m
E2E_REAL_TIMEOUT ?= 30m
# How much each fuzz target runs: briefly in make test, longer on demand
# (make test-fuzz FUZZ_TIME=2000000x). A count rather than a duration: with a
# duration, Go 1.26's fuzz coordinator can report its own stop as a failure,
# "context deadline exceeded" with no failing input (golang/go#75804).
FUZZ_TIME ?= 10000x
FUZZ_TARGETS := internal/lifecycle:FuzzExpiry internal/controller/trainjob:FuzzActiveDeadline \
	internal/jobplan:FuzzBuild internal/config:FuzzDecode internal/statusserver:FuzzDecode

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: tools
tools: ## Build the pinned tools and control-plane binaries into bin/ (only what is missing or stale; not Kueue).
	@hack/build-tools.sh

.PHONY: coscheduler
coscheduler: ## Build the coscheduling scheduler (hack/tools/coscheduling) into bin/; 3 to 5 minutes the first time. make test-e2e runs it.
	@hack/build-tools.sh coscheduler

.PHONY: kueue
kueue: ## Build Kueue (hack/tools/kueue) into bin/; 9 to 16 minutes the first time. make dev KUEUE=1 and make test run it.
	@hack/build-tools.sh kueue

.PHONY: prometheus
prometheus: ## Build Prometheus (hack/tools/prometheus) into bin/; a few minutes the first time. make dev PROMETHEUS=1 and make test run it.
	@hack/build-tools.sh prometheus

.PHONY: real-node
real-node: ## Install runc (Debian, as root) and build the real node's kubelet, containerd, CNI plugins, CoreDNS and the image builder into bin/. make dev REAL=1 and make test run it.
	@hack/real-node-deps.sh
	@hack/build-tools.sh real imagebuild

.PHONY: train-image
train-image: build ## Build the real node's training image (Debian, PyTorch for CPUs, OpenMPI, OpenSSH, mpi4py, XGBoost; as root; cached by its inputs) and load it into the dev cluster's real node if one runs.
	@archive="$$(hack/train-image.sh)"; \
	if [ -S .dev/real/containerd/containerd.sock ]; then $(BIN)/trainjob-dev load-image "$$archive"; \
	else echo "train-image: $$archive; make dev-up REAL=1 and make train-image load it as localhost/trainjob-operator/train-cpu:latest"; fi

.PHONY: generate
generate: ## Generate DeepCopy methods from the API types.
	@hack/build-tools.sh controller-gen >/dev/null
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths="./api/..."

.PHONY: manifests
manifests: ## Generate CRDs, RBAC and webhook configuration from markers, and the Helm chart's files from config/.
	@hack/build-tools.sh controller-gen >/dev/null
	$(CONTROLLER_GEN) rbac:roleName=trainjob-operator-manager crd:generateEmbeddedObjectMeta=true webhook \
		paths="./api/..." paths="./internal/..." \
		output:crd:artifacts:config=config/crd/bases \
		output:rbac:artifacts:config=config/rbac \
		output:webhook:artifacts:config=config/webhook
	@hack/build-tools.sh kubectl >/dev/null
	{ $(BIN)/kubectl kustomize config/default; echo ---; $(BIN)/kubectl kustomize config/kubeflow-sdk; } | go run ./hack/chartgen charts/trainjob-operator

.PHONY: fmt
fmt: ## Format the Go code.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: ## Run golangci-lint.
	@hack/build-tools.sh golangci-lint >/dev/null
	$(GOLANGCI_LINT) run ./...
	cd bench && $(GOLANGCI_LINT) run --config $(ROOT)/.golangci.yml ./...
	cd hack/tools/image && $(GOLANGCI_LINT) run --config $(ROOT)/.golangci.yml ./...

.PHONY: verify
verify: generate manifests ## Fail if generated files, go.mod or formatting drift from the sources, or a product binary links the tooling.
	go mod tidy
	cd hack/tools && go mod tidy
	cd hack/tools/golangci-lint && go mod tidy
	cd hack/tools/kueue && GONOSUMDB=sigs.k8s.io/scheduler-library go mod tidy
	cd hack/tools/coscheduling && go mod tidy
	cd hack/tools/volcano && go mod tidy
	cd hack/tools/image && go mod tidy
	cd hack/tools/helm && go mod tidy
	cd hack/tools/prometheus && go mod tidy
	cd hack/tools/kubelet && go mod tidy
	cd hack/tools/containerd && go mod tidy
	cd hack/tools/cni && go mod tidy
	cd hack/tools/coredns && go mod tidy
	cd hack/tools/kubeflow && go mod tidy
	cd bench && go mod tidy
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed on:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	@git diff --exit-code -- api config charts go.mod go.sum hack bench/go.mod bench/go.sum || { echo; echo "Generated files or go.mod are out of date: run 'make generate manifests' and 'go mod tidy', then commit."; exit 1; }
	@untracked="$$(git ls-files --others --exclude-standard -- api config charts)"; test -z "$$untracked" || { echo "Untracked generated files: $$untracked"; exit 1; }
	@hack/check-deps.sh
	@hack/check-license.sh

.PHONY: build
build: ## Build the manager, trainctl and the local cluster's trainjob-dev into bin/.
	go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/manager ./cmd/manager
	go build -ldflags "$(VERSION_LDFLAGS)" -o $(BIN)/trainctl ./cmd/trainctl
	go build -o $(BIN)/trainjob-dev ./cmd/trainjob-dev

##@ Release

# make image: the platforms built, and registry references to push to
# (IMAGE="registry.example.com/trainjob-operator:v0.3.0 ...").
PLATFORMS ?= linux/amd64 linux/arm64
IMAGE ?=
export PLATFORMS IMAGE

# make release: the image repository the manifests name, pushed as
# IMAGE_REPO:VERSION.
IMAGE_REPO ?=
export IMAGE_REPO

.PHONY: release
release: IMAGE = $(IMAGE_REPO):$(VERSION)
release: release-check image ## VERSION=v… IMAGE_REPO=registry/repo: build and push the image; write dist/install.yaml, dist/runtimes.yaml and the Helm chart's package, naming it by digest.
	@hack/release.sh

.PHONY: release-check
release-check:
	@test -n "$(IMAGE_REPO)" || { echo "make release needs IMAGE_REPO=registry.example.com/trainjob-operator (and VERSION=v…)"; exit 1; }
	@[[ "$(VERSION)" =~ ^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$$ && "$(VERSION)" != *-dirty ]] || \
		{ echo "make release needs VERSION=vMAJOR.MINOR.PATCH[-PRERELEASE] (SemVer, not -dirty), not $(VERSION)"; exit 1; }
	@hack/build-tools.sh kubectl helm >/dev/null

.PHONY: image
image: ## Build the manager's OCI image for PLATFORMS, without a container engine, into dist/image (OCI layout) and dist/image.tar; IMAGE=ref pushes it too.
	@hack/build-tools.sh imagebuild >/dev/null
	@hack/image.sh

##@ Local cluster

# KUEUE=1 (make dev KUEUE=1, make dev-up KUEUE=1) also runs Kueue beside the
# manager, building it first if needed: see docs/kueue.md.
KUEUE ?=
# MULTIKUEUE=1 also brings up two worker clusters, each with Kueue and the
# manager, and runs Kueue here with MultiKueue dispatching to them (Kueue
# built first if needed): see docs/multicluster.md.
MULTIKUEUE ?=
DEV_MULTIKUEUE := $(if $(filter 1 true yes,$(MULTIKUEUE)),multikueue)
DEV_KUEUE := $(if $(filter 1 true yes,$(KUEUE))$(DEV_MULTIKUEUE),kueue)
# COSCHEDULING=1 also runs the coscheduling scheduler of the Kubernetes
# scheduler-plugins beside kube-scheduler, building it first if needed.
COSCHEDULING ?=
DEV_COSCHEDULER := $(if $(filter 1 true yes,$(COSCHEDULING)),coscheduler)
# PROMETHEUS=1 also runs Prometheus, scraping the manager and kube-apiserver
# with the chart's alerts, building it first if needed: see
# docs/observability.md.
PROMETHEUS ?=
DEV_PROMETHEUS := $(if $(filter 1 true yes,$(PROMETHEUS)),prometheus)
# REAL=1 also runs a real node (kubelet, containerd, CNI, CoreDNS) as root,
# installing runc and building them first if needed: see docs/real-node.md.
REAL ?=
DEV_REAL := $(if $(filter 1 true yes,$(REAL)),real-node)
DEV_FLAGS := $(if $(DEV_KUEUE),--kueue) $(if $(DEV_MULTIKUEUE),--multikueue) $(if $(DEV_COSCHEDULER),--coscheduler) $(if $(DEV_PROMETHEUS),--prometheus) $(if $(DEV_REAL),--real)

.PHONY: dev
dev: tools build $(DEV_KUEUE) $(DEV_COSCHEDULER) $(DEV_PROMETHEUS) $(DEV_REAL) ## Run the product on a local control plane, apply the samples and show their lifecycles; Ctrl-C tears down (KUEUE=1: with Kueue; MULTIKUEUE=1: with two worker clusters and MultiKueue; COSCHEDULING=1: with a gang scheduler; PROMETHEUS=1: with Prometheus; REAL=1: with a real node, as root).
	$(BIN)/trainjob-dev run $(DEV_FLAGS)

.PHONY: dev-up
dev-up: tools build $(DEV_KUEUE) $(DEV_COSCHEDULER) $(DEV_PROMETHEUS) $(DEV_REAL) ## Bring the local cluster and the manager up and leave them running (kubeconfig: .dev/kubeconfig; KUEUE=1: with Kueue; MULTIKUEUE=1: with two worker clusters and MultiKueue; COSCHEDULING=1: with a gang scheduler; PROMETHEUS=1: with Prometheus; REAL=1: with a real node, as root).
	$(BIN)/trainjob-dev up $(DEV_FLAGS)

.PHONY: dev-down
dev-down: ## Stop the manager (and Kueue, the coscheduling scheduler, Prometheus, the real node) and delete the local cluster.
	@test -x $(BIN)/trainjob-dev || go build -o $(BIN)/trainjob-dev ./cmd/trainjob-dev
	$(BIN)/trainjob-dev down

##@ Tests

.PHONY: test
test: tools vet test-unit test-fuzz test-integration test-e2e test-e2e-kueue test-e2e-multikueue test-e2e-prometheus test-faults-short test-e2e-real ## Run every test suite (builds the tools, and Kueue, Prometheus and the real node's tools, first if needed; the real node's suite needs root).

.PHONY: test-unit
test-unit: ## Run the unit tests, and those of the image builder (hack/tools/image).
	go test $(GO_TEST_FLAGS) $$(go list ./... | grep -v /test/)
	cd hack/tools/image && go test $(GO_TEST_FLAGS) ./...

.PHONY: test-fuzz
test-fuzz: ## Run each fuzz target for FUZZ_TIME executions or time (default 10000x).
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "fuzz: $$name in ./$$pkg for $(FUZZ_TIME)"; \
		go test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZ_TIME) ./$$pkg || exit 1; \
	done

.PHONY: test-integration
test-integration: ## Run the integration tests on envtest (real kube-apiserver and etcd), the Helm chart's among them.
	@hack/build-tools.sh etcd kube-apiserver kubectl helm
	go test $(GO_TEST_FLAGS) -timeout $(INTEGRATION_TIMEOUT) ./test/integration/...

.PHONY: test-e2e
test-e2e: tools build coscheduler ## Run the end-to-end tests on a local cluster of their own (real Job controller, scheduler, kwok nodes; the coscheduling scheduler for the gang test, Helm for the chart's install).
	@hack/build-tools.sh helm >/dev/null
	go test $(GO_TEST_FLAGS) -timeout $(E2E_TIMEOUT) ./test/e2e/...

.PHONY: test-e2e-kueue
test-e2e-kueue: tools build kueue ## Run the end-to-end tests with Kueue (built first if needed) on a local cluster of their own.
	go test $(GO_TEST_FLAGS) -v -timeout $(E2E_KUEUE_TIMEOUT) ./test/e2e-kueue/... 2>&1 | \
		grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: test-e2e-multikueue
test-e2e-multikueue: tools build kueue ## Run TrainJobs through Kueue's MultiKueue (built first if needed): a manager cluster and two worker clusters of their own, each with Kueue and the manager.
	go test $(GO_TEST_FLAGS) -v -timeout $(E2E_MULTIKUEUE_TIMEOUT) ./test/e2e-multikueue/... 2>&1 | \
		grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: test-e2e-prometheus
test-e2e-prometheus: tools build prometheus ## Check the chart's alerts and dashboard against the real Prometheus (built first if needed) on a local cluster of their own.
	go test $(GO_TEST_FLAGS) -v -timeout $(E2E_PROMETHEUS_TIMEOUT) ./test/e2e-prometheus/... 2>&1 | \
		grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: test-e2e-real
test-e2e-real: tools build real-node kueue ## Run real training programs (torchrun, mpirun, XGBoost) on the real node (kubelet, containerd, CNI, CoreDNS), with Kueue, on a local cluster of their own; builds the training image first if needed (hack/train-image.sh); needs root.
	go test $(GO_TEST_FLAGS) -v -timeout $(E2E_REAL_TIMEOUT) ./test/e2e-real/... 2>&1 | \
		grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: test-faults
test-faults: tools build ## Fault scenarios on a local cluster of their own, full size (FAULTS_TRAINJOBS=500).
	FAULTS_TRAINJOBS=$${FAULTS_TRAINJOBS:-500} go test $(GO_TEST_FLAGS) -v -timeout 85m ./test/faults/... 2>&1 | \
		grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'

.PHONY: test-faults-short
test-faults-short: tools build ## The fault scenarios, small (60 TrainJobs), as make test runs them.
	FAULTS_TRAINJOBS=60 go test $(GO_TEST_FLAGS) -v -timeout 20m ./test/faults/... 2>&1 | \
		grep --line-buffered -vE '^=== (RUN|PAUSE|CONT)'

##@ Benchmarks

# Flags of make bench, e.g. BENCH_FLAGS="-full" or "-scenarios b1 -ttl-n 10000".
BENCH_FLAGS ?=

.PHONY: bench
bench: build ## Benchmarks on the cluster of make dev-up, beside kube-controller-manager (BENCH_FLAGS=-full for the full sizes); results in bench/results.
	@test -f .dev/state.json || { echo "No local cluster: run 'make dev-up' first."; exit 1; }
	cd bench && go run . -root $(ROOT) $(BENCH_FLAGS)
