# sharestate-operator: Kafka share-group state on Kubernetes.
# `make help` lists the targets.

# Where the pinned tools are built (from hack/tools/go.mod).
LOCALBIN ?= $(CURDIR)/bin
CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
HELM ?= $(LOCALBIN)/helm
TOOLS_MOD := hack/tools/go.mod
HELM_MOD := hack/tools/helm/go.mod
IMAGE_BUILD ?= $(LOCALBIN)/image-build
IMAGES_MOD := hack/tools/images/go.mod
ACTIONLINT ?= $(LOCALBIN)/actionlint
SBOM_TOOL ?= $(LOCALBIN)/cyclonedx-gomod
RELEASE_MOD := hack/tools/release/go.mod
CHART := charts/sharestate-operator

# The local control plane of `make run` keeps its data here (etcd, kubeconfig, certificates).
RUN_DIR ?= $(CURDIR)/.run

# go test flags for `make test`; e.g. `make test TEST_FLAGS='-run TestCRD -v'`.
TEST_FLAGS ?=
GO_TEST_TIMEOUT ?= 30m

# flags for `make bench`; e.g. `make bench BENCH_FLAGS='-duration 10s -scenarios raw-update,persister-1x1'`.
BENCH_FLAGS ?=

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRDs (config/crd/bases) and RBAC roles (config/rbac) from the markers.
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=sharestate-operator paths="./controllers/..." output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=sharestate-sidecar paths="./pkg/sharestate/..." paths="./internal/sidecar/..." output:rbac:artifacts:config=config/rbac/sidecar

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate the DeepCopy methods of the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## Run gofmt over the code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) lint-workflows release-check ## Run golangci-lint (config: .golangci.yml), actionlint on the workflows, and the release's consistency check.
	$(GOLANGCI_LINT) run --build-tags e2e,kafka,cluster ./...
	for mod in hack/tools/images hack/tools/release hack/tools/coredns; do (cd $$mod && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...); done

.PHONY: lint-workflows
lint-workflows: $(ACTIONLINT) ## Check .github/workflows with actionlint.
	$(ACTIONLINT)

.PHONY: verify
verify: generate manifests ## Regenerate everything and fail if anything (code, CRDs, RBAC, chart copies, go.mod) is stale or unformatted, or a commit message breaks the rule.
	hack/check-commits.sh
	go mod tidy
	hack/sync-chart-crds.sh
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-clean:"; echo "$$unformatted"; exit 1; fi
	@if [ -n "$$(git status --porcelain -- api config charts go.mod go.sum)" ]; then \
		echo "generated files are stale; run 'make generate manifests chart-sync && go mod tidy' and commit:"; \
		git status --porcelain -- api config charts go.mod go.sum; git diff --stat -- api config charts go.mod go.sum; exit 1; fi

.PHONY: test
test: ## Run every test, against a real kube-apiserver and etcd (built and cached on first use).
	assets=$$(hack/envtest-assets.sh); \
	KUBEBUILDER_ASSETS="$$assets" go test ./... -count=1 -timeout $(GO_TEST_TIMEOUT) $(TEST_FLAGS)

.PHONY: test-e2e
test-e2e: ## Run the whole system end to end: kubectl, helm, the operator, three sidecars and simulated consumers (test/e2e).
	assets=$$(hack/envtest-assets.sh); \
	KUBEBUILDER_ASSETS="$$assets" go test -tags e2e ./test/e2e/... -count=1 -v -timeout 15m $(TEST_FLAGS)

# The Kafka version of `make test-kafka` (hack/kafka-assets.sh resolves its jars from Maven Central).
KAFKA_VERSION ?= 4.4.0

.PHONY: test-kafka
test-kafka: ## Run the system with real Apache Kafka brokers (KAFKA_VERSION), Kafka's share consumer and tools (test/kafka).
	assets=$$(hack/envtest-assets.sh); kafka=$$(KAFKA_VERSION=$(KAFKA_VERSION) hack/kafka-assets.sh); \
	KUBEBUILDER_ASSETS="$$assets" KAFKA_VERSION=$(KAFKA_VERSION) KAFKA_ASSETS="$$kafka" \
	go test -tags kafka ./test/kafka/... -count=1 -v -timeout 20m $(TEST_FLAGS)

# The images of `make test-cluster`: the operator's and the sidecar's, and the test cluster's pause and
# stand-in broker, as localhost/sharestate/<name>:dev (none passes for a published image); and
# Kafka's broker and clients, as localhost/sharestate/kafka{,-clients}:$(KAFKA_VERSION) (hack/kafka-image.sh).
CLUSTER_IMAGES_DIR ?= $(LOCALBIN)/cluster-images
CLUSTER_IMAGES = $(IMAGES) pause=./test/cluster/pause standin=./test/cluster/standin
# What a failed step of `make test-cluster` saved (the pods' logs at the failure), a directory per step.
CLUSTER_ARTIFACTS ?= $(LOCALBIN)/cluster-artifacts

.PHONY: test-release
test-release: $(HELM) $(IMAGE_BUILD) $(SBOM_TOOL) ## Run the release (hack/release.sh publish) into a local registry and check what it pushed (hack/tools/release).
	cd hack/tools/release && HELM=$(HELM) IMAGE_BUILD=$(IMAGE_BUILD) SBOM_TOOL=$(SBOM_TOOL) go test . -count=1 -v $(TEST_FLAGS)

.PHONY: test-cluster
test-cluster: $(IMAGE_BUILD) $(HELM) ## Run the system in pods on a one-node cluster (test/cluster; needs root, containerd, runc, CNI plugins, mmdebstrap): helm install, the sidecar in a broker pod, fencing as Kubernetes ends pods, Kafka brokers in pods.
	IMG_REPO=localhost/sharestate IMG_TAG=dev OUT_DIR=$(CLUSTER_IMAGES_DIR) IMAGE_BUILD=$(IMAGE_BUILD) \
		hack/build-images.sh $(CLUSTER_IMAGES)
	IMAGE_BUILD=$(IMAGE_BUILD) KAFKA_VERSION=$(KAFKA_VERSION) hack/kafka-image.sh $(CLUSTER_IMAGES_DIR)
	assets=$$(hack/envtest-assets.sh); cluster=$$(hack/cluster-assets.sh); mkdir -p $(CLUSTER_ARTIFACTS); \
	KUBEBUILDER_ASSETS="$$assets" CLUSTER_ASSETS="$$cluster" CLUSTER_IMAGES=$(CLUSTER_IMAGES_DIR) HELM=$(HELM) \
	go test -tags cluster ./test/images/... ./test/cluster/... ./test/incluster/... -count=1 -v -timeout 30m \
		-artifacts -outputdir $(CLUSTER_ARTIFACTS) $(TEST_FLAGS)

.PHONY: test-unit
test-unit: ## Run only the tests that need no control plane.
	go test ./... -count=1 -short $(TEST_FLAGS)

.PHONY: bench
bench: ## Measure share-state writes (throughput, latency, API requests per write) on one local control plane.
	assets=$$(hack/envtest-assets.sh); \
	KUBEBUILDER_ASSETS="$$assets" go run ./hack/bench $(BENCH_FLAGS)

##@ Build

.PHONY: build
build: ## Build the project's binaries into ./bin.
	go build -o $(LOCALBIN)/ ./cmd/sharestate-operator ./cmd/sharestate-sidecar ./cmd/kubectl-sharestate ./hack/run-local

# The images' registry and tag: the chart's defaults (values.yaml, appVersion), what a release pushes.
IMG_REPO ?= ghcr.io/sharestate
IMG_TAG ?= $(shell sed -n 's/^appVersion: *//p' $(CHART)/Chart.yaml)

# The images of `make images`: archives in IMAGES_DIR for the host's platform, or, with IMAGE_PUSH=true,
# an index of IMAGE_PLATFORMS (comma-separated) pushed to IMG_REPO (the release workflow's).
IMAGES_DIR ?= $(LOCALBIN)/images
IMAGE_PLATFORMS ?= linux/$(shell go env GOARCH)
IMAGE_PUSH ?= false
IMAGES := sharestate-operator=./cmd/sharestate-operator sharestate-sidecar=./cmd/sharestate-sidecar

.PHONY: images
images: $(IMAGE_BUILD) ## Build the operator and sidecar images without Docker: bin/images/<name>.tar (ctr images import, docker load), IMG_REPO/<name>:IMG_TAG.
	IMG_REPO=$(IMG_REPO) IMG_TAG=$(IMG_TAG) PLATFORMS=$(IMAGE_PLATFORMS) OUT_DIR=$(IMAGES_DIR) PUSH=$(IMAGE_PUSH) \
		IMAGE_BUILD=$(IMAGE_BUILD) hack/build-images.sh $(IMAGES)

.PHONY: kafka-image
kafka-image: $(IMAGE_BUILD) ## Build the test cluster's Kafka images (broker, and clients with the tests' ShareTool) from Debian's packages and Maven Central: bin/images/kafka{,-clients}.tar (needs root and mmdebstrap).
	IMAGE_BUILD=$(IMAGE_BUILD) KAFKA_VERSION=$(KAFKA_VERSION) hack/kafka-image.sh $(IMAGES_DIR)

.PHONY: release-check
release-check: $(HELM) ## Check that the tag (RELEASE_TAG), the chart's version and the images its defaults run agree.
	HELM=$(HELM) hack/release.sh check

.PHONY: release
release: $(HELM) $(IMAGE_BUILD) $(SBOM_TOOL) ## Push the images (linux/amd64, arm64), their SBOMs and the chart (the release workflow's step; needs registry credentials).
	HELM=$(HELM) IMAGE_BUILD=$(IMAGE_BUILD) SBOM_TOOL=$(SBOM_TOOL) hack/release.sh publish

.PHONY: docker-build
docker-build: ## Build the operator and sidecar images (needs a Docker engine; none runs on the CI machine).
	docker build --build-arg BINARY=sharestate-operator -t $(IMG_REPO)/sharestate-operator:$(IMG_TAG) .
	docker build --build-arg BINARY=sharestate-sidecar -t $(IMG_REPO)/sharestate-sidecar:$(IMG_TAG) .

# Built, then exec'd rather than `go run`: `go run` exits 1 when Ctrl-C reaches it, even though the
# program stops cleanly and exits 0.
.PHONY: run
run: ## Run the system and a stand-in broker writing share state: on a local control plane (data in .run/), or on the cluster that KUBECONFIG names. Builds bin/kubectl-sharestate.
	assets=$$(hack/envtest-assets.sh); \
	mkdir -p $(LOCALBIN); go build -o $(LOCALBIN)/ ./hack/run-local ./cmd/kubectl-sharestate; \
	KUBEBUILDER_ASSETS="$$assets" exec $(LOCALBIN)/run-local --run-dir="$(RUN_DIR)" --crd-dir=config/crd/bases

.PHONY: run-kafka
run-kafka: ## Run the system with three real Apache Kafka brokers behind proxy-mode sidecars (KAFKA_VERSION; data in .run-kafka/, emptied at start).
	assets=$$(hack/envtest-assets.sh); kafka=$$(KAFKA_VERSION=$(KAFKA_VERSION) hack/kafka-assets.sh); \
	mkdir -p $(LOCALBIN); go build -o $(LOCALBIN)/ ./hack/run-kafka ./cmd/sharestate-sidecar; \
	KUBEBUILDER_ASSETS="$$assets" KAFKA_VERSION=$(KAFKA_VERSION) exec $(LOCALBIN)/run-kafka --kafka-assets="$$kafka" \
		--sidecar=$(LOCALBIN)/sharestate-sidecar --crd-dir=config/crd/bases

##@ Deployment

.PHONY: install
install: ## Install the CRDs into the cluster that kubectl talks to.
	kubectl apply --server-side -f config/crd/bases

.PHONY: uninstall
uninstall: ## Remove the CRDs (and with them every ShareGroup and SharePartitionState!), with or without a running operator.
	hack/uninstall-crds.sh

##@ Chart

.PHONY: chart-sync
chart-sync: manifests ## Copy the generated CRDs and RBAC rules into the chart.
	hack/sync-chart-crds.sh

.PHONY: chart-lint
chart-lint: $(HELM) ## Lint the chart (helm lint --strict).
	$(HELM) lint --strict $(CHART)

.PHONY: chart-test
chart-test: $(HELM) ## Render the chart for several value sets and check the objects (test/chart).
	HELM=$(HELM) go test ./test/chart/... -count=1 $(TEST_FLAGS)

##@ Tools

.PHONY: controller-gen
controller-gen: $(CONTROLLER_GEN) ## Build the pinned controller-gen (hack/tools/go.mod) into ./bin.

.PHONY: golangci-lint
golangci-lint: $(GOLANGCI_LINT) ## Build the pinned golangci-lint (hack/tools/go.mod) into ./bin.

.PHONY: helm
helm: $(HELM) ## Build the pinned helm (hack/tools/helm/go.mod) into ./bin.

.PHONY: envtest
envtest: ## Build (first time only) and print the directory of kube-apiserver, etcd and kubectl for the tests.
	@hack/envtest-assets.sh

$(CONTROLLER_GEN): $(TOOLS_MOD)
	go build -modfile=$(TOOLS_MOD) -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(GOLANGCI_LINT): $(TOOLS_MOD)
	go build -modfile=$(TOOLS_MOD) -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

$(IMAGE_BUILD): $(IMAGES_MOD) $(wildcard hack/tools/images/*.go)
	cd hack/tools/images && go build -o $@ .

$(ACTIONLINT): $(RELEASE_MOD)
	cd hack/tools/release && go build -o $@ github.com/rhysd/actionlint/cmd/actionlint

$(SBOM_TOOL): $(RELEASE_MOD)
	cd hack/tools/release && go build -o $@ github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

$(HELM): $(HELM_MOD)
	hack/tools/helm/build.sh $@
