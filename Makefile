# agentpen: make targets. Every target that needs the rootless Docker daemon starts it (or finds
# it) through scripts/rootless-docker.sh, so `make test` works on a fresh Debian 12 machine as root.

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO ?= go
STAMP := -X github.com/agentpen/agentpen/internal/cli.Stamp=$$(git describe --always --dirty 2>/dev/null || echo devel) \
	-X github.com/agentpen/agentpen/internal/cli.StampCommit=$$(git rev-parse HEAD 2>/dev/null || echo unknown)
GOFLAGS_BUILD := -trimpath -ldflags="-s -w $(STAMP)"
# Sets DOCKER_HOST for the rest of a recipe line.
WITH_DOCKER := eval "$$(scripts/rootless-docker.sh)" &&
# In CI a test that needs Docker or root fails instead of skipping.
ifeq ($(CI),true)
export AGENTPEN_REQUIRE_DOCKER := 1
endif
# The one wall-clock bound of a test package's run (go test -timeout): every wait in a test ends
# at it (internal/testenv), none has a bound of its own. An hour: a hang still fails, a package
# slowed by a loaded machine and a shared daemon does not (the adapter's took over 15 minutes with
# other work on 2 cores).
TEST_TIMEOUT ?= 60m
# Options of scripts/demo.sh for make run (--json: the results as JSON on stdout).
DEMO_FLAGS ?=
FUZZTIME ?= 30s
BENCHTIME ?= 30x
# More flags of make bench (go run ./bench): the workbench's rows alone, the campaigns' kept
# from the last run, say: BENCHFLAGS="-packages ./workbench/sandbox,./workbench/episode,./bench -keep".
BENCHFLAGS ?=
# The workbench image make images builds and the tests and make run use. A branch whose
# workbench binary changed builds its own tag (make images test WORKBENCH_IMAGE=agentpen/workbench:x)
# so that work beside it on the same daemon keeps the image it expects.
WORKBENCH_IMAGE ?= agentpen/workbench:dev
export AGENTPEN_TEST_WORKBENCH_IMAGE := $(WORKBENCH_IMAGE)

# The concurrent packages run under the race detector in make test (the rest
# without it, so nothing runs twice).
RACE_PKGS := ./adapter/... ./launcher/... ./store/... ./workbench/server/... ./workbench/grader/... ./workbench/sandbox/... ./internal/...
# The packages that hold cluster tests: those with a test file behind the build tag kube
# (make kube-test runs them on the node of scripts/kube-node.sh; make test never builds them).
KUBE_PKGS = $$(grep -rl --include='*_test.go' '^//go:build kube$$' . | xargs -n1 dirname | sort -u)

.PHONY: all deps docker docker-stop build images test unit vet lint shellcheck fmt-check tidy-check fuzz bench hostile kube-node kube-node-stop kube-test kube-bench cosign-check run serve clean help

all: build

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

deps: ## install what the build and tests need (Debian packages; Go must be installed)
	@command -v $(GO) >/dev/null || { echo "Go 1.26 is required (https://go.dev/dl), at /usr/local/go/bin or on PATH" >&2; exit 1; }
	@scripts/deps.sh

docker: deps ## start (or find) the rootless Docker daemon and print its DOCKER_HOST
	@scripts/rootless-docker.sh >/dev/null

docker-stop: ## stop the rootless daemon this project started
	@scripts/rootless-docker.sh stop

build: ## build static binaries into bin/ (workbench root-only, 0700: it holds every answer key)
	CGO_ENABLED=0 $(GO) build $(GOFLAGS_BUILD) -o bin/ ./cmd/...
	@# As root with the sandbox on, `workbench serve` refuses to start from a binary the
	@# sandbox uids could read or run: they would run a grader of their own from it.
	chmod 0700 bin/workbench

images: docker build ## build the local images: agentpen/python-base:bookworm and $(WORKBENCH_IMAGE) (agentpen/workbench:dev)
	@$(WITH_DOCKER) scripts/python-base.sh
	@# The legacy builder (no buildx here) never pulls a base that exists locally; its
	@# deprecation notice is dropped, any other message is kept.
	@$(WITH_DOCKER) set -o pipefail; DOCKER_BUILDKIT=0 docker build -q \
		--build-arg PYTHON_BASE=agentpen/python-base:bookworm \
		--build-arg SANDBOX_PYTHON=/usr/bin/python3 \
		--build-arg WORKBENCH_VERSION=$$(git describe --always --dirty 2>/dev/null || echo devel) \
		-t $(WORKBENCH_IMAGE) . 2>&1 >/dev/null | { grep -v -e DEPRECATED -e 'BuildKit is currently disabled' -e 'environment-variable' -e '^$$' >&2 || true; } && \
		docker image inspect --format '$(WORKBENCH_IMAGE) {{.Id}}' $(WORKBENCH_IMAGE)

vet: ## go vet ./...
	$(GO) vet ./...

lint: shellcheck ## staticcheck (the version go.mod pins as a tool), shellcheck over scripts/ and .ci/, and the form of commit messages since d9d57a6 (scripts/commit-check.sh)
	$(GO) tool staticcheck ./...
	@scripts/commit-check.sh

fmt-check: ## fail when a Go file is not gofmt-formatted
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "not gofmt-formatted (run: gofmt -w .):" >&2; echo "$$out" >&2; exit 1; }

tidy-check: ## fail when go mod tidy would change go.mod or go.sum
	@$(GO) mod tidy -diff >/dev/null || { echo "go.mod/go.sum are not tidy (run: go mod tidy):" >&2; $(GO) mod tidy -diff >&2; exit 1; }

shellcheck: ## lint every script in scripts/ and .ci/ (shellcheck, installed by scripts/deps.sh)
	@command -v shellcheck >/dev/null || { echo "shellcheck is missing: run scripts/deps.sh" >&2; exit 1; }
	shellcheck -x $$(git ls-files scripts .ci)

test: images vet lint fmt-check tidy-check ## the test command: daemon, images, go vet, staticcheck, shellcheck and commit-message, gofmt and tidy checks, go test (-race on the concurrent packages; Docker tests fail instead of skip when CI=true)
	@# -count=1: results of tests against the daemon and as root never come from the cache.
	@$(WITH_DOCKER) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -race $(RACE_PKGS)
	@$(WITH_DOCKER) $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $$($(GO) list ./... | grep -v -x -F "$$($(GO) list $(RACE_PKGS))")

unit: ## go test without starting anything (tests that need Docker skip, or fail with CI=true)
	$(GO) test ./...

fuzz: ## run every fuzz target for FUZZTIME (default 30s) each
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$f ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

cosign-check: ## opt-in: cosign verify-blob-attestation of signed reports (builds cosign v2 into ~/.cache/agentpen/cosign once, ~10 min)
	scripts/cosign-check.sh

bench: ## benchmarks against issue 16's targets (as root, with the daemon): prints the table, writes bench/results.json and docs/bench.md
	@# The campaign benchmarks fail, never skip, without the daemon.
	@# -keep: the cluster rows (make kube-bench) stay, marked with their run.
	@$(WITH_DOCKER) AGENTPEN_REQUIRE_DOCKER=1 $(GO) run ./bench -keep -benchtime $(BENCHTIME) $(BENCHFLAGS)

hostile: images ## the hostile corpus under load, a CI step of its own: busy loops on every core, kill_under_load RUNS times (default 200) on this host and in a workspace container (about 21 min on this 2-core machine; CI runs RUNS=100)
	@$(WITH_DOCKER) scripts/hostile-load.sh

kube-node: images ## start the single-node Kubernetes cluster of scripts/kube-node.sh (the first time it builds it: about 16 min on 2 cores) and print its `export KUBECONFIG=...` line
	@scripts/kube-node.sh start

kube-node-stop: ## stop that node and restore the host as it was (scripts/kube-node.sh stop)
	@scripts/kube-node.sh stop

kube-test: images ## the node script's own test (TestKubeNodeScript, build tag kubenode), then the cluster tests (build tag kube) on the node and the demo of make run played there (KUBE=1): starts the node, runs them with KUBECONFIG set, and stops it on every exit path (a CI step of its own)
	@$(WITH_DOCKER) $(GO) test -tags kubenode -count=1 -timeout $(TEST_TIMEOUT) -run '^TestKubeNodeScript$$' .
	@# The EXIT trap stops the node whatever ended the recipe; a stop that cannot restore the
	@# host fails the target even when the tests passed. It stops only a node it started: a node
	@# already recorded (someone's make kube-node) is refused first.
	@rc=0; scripts/kube-node.sh status >/dev/null 2>&1 || rc=$$?; [ $$rc -eq 6 ] || \
		{ echo "make kube-test: a node is recorded already (scripts/kube-node.sh status); stop it first" >&2; exit 1; }; \
		trap 'scripts/kube-node.sh stop || exit 5' EXIT; trap 'exit 130' INT TERM; \
		line=$$(scripts/kube-node.sh start) && eval "$$line" && \
		$(WITH_DOCKER) $(GO) test -tags kube -count=1 -timeout $(TEST_TIMEOUT) $(KUBE_PKGS) && \
		$(WITH_DOCKER) eval "$$(scripts/kube-node.sh env)" && scripts/demo.sh

kube-bench: ## the cluster benchmarks (build tag kube) on the node of KUBECONFIG (make kube-node first), beside the rows of the last make bench (kept, marked)
	@test -n "$$KUBECONFIG" || { echo "make kube-bench: KUBECONFIG is unset: make kube-node, then export the line it prints" >&2; exit 2; }
	@$(WITH_DOCKER) $(GO) run ./bench -tags kube -packages ./adapter/kube -keep -benchtime 5x $(BENCHFLAGS)

run: images ## the main job as a launcher sees it: agentpen doctor, then agentpen serve and a campaign through its HTTP API (create, one episode per workspace through the proxy, attest, delete); DEMO_FLAGS=--json prints the results as JSON; KUBE=1 plays it on the project's Kubernetes node (started if it is not, and left running: make kube-node-stop)
ifeq ($(KUBE),1)
	@scripts/kube-node.sh start >/dev/null && scripts/kube-node.sh images
	@$(WITH_DOCKER) eval "$$(scripts/kube-node.sh env)" && bin/agentpen doctor && scripts/demo.sh $(DEMO_FLAGS)
else
	@$(WITH_DOCKER) bin/agentpen doctor
	@$(WITH_DOCKER) scripts/demo.sh $(DEMO_FLAGS)
endif

serve: images ## run agentpen serve in the foreground on 127.0.0.1:8700 (token: AGENTPEN_SERVE_TOKEN, else a generated token file)
	@$(WITH_DOCKER) scripts/serve.sh

clean: ## remove bin/
	rm -rf bin
