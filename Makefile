# extauthz: run `make help` for the targets.
GO       ?= go
BIN      ?= bin
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS  := -X github.com/extauthz/extauthz/internal/app.Version=$(VERSION)
BENCHTIME ?= 1s

.DEFAULT_GOAL := help

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# Debian packages the tests use: nginx (with its njs module) and caddy for
# the end-to-end tests through real proxies, protoc for the generated-code
# check, redis-server for the shared-state tier.
DEB_PACKAGES := nginx libnginx-mod-http-js caddy protobuf-compiler libprotobuf-dev redis-server
# The TypeScript MCP SDK clients of the end-to-end tests (package-lock.json).
TS_CLIENT := internal/e2e/testdata/ts

.PHONY: deps
deps: ## Install the system packages the tests need (Debian; idempotent).
	@scripts/install-deps.sh $(DEB_PACKAGES)
	@cd $(TS_CLIENT) && npm ci --no-audit --no-fund --loglevel=error
	@scripts/install-helm.sh

.PHONY: build
build: ## Build bin/extauthz and bin/extauthz-loadtest.
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/extauthz ./cmd/extauthz
	$(GO) build -o $(BIN)/extauthz-loadtest ./cmd/extauthz-loadtest

.PHONY: run
run: ## Run the service on its built-in defaults (JWT_SECRET, HS256).
	$(GO) run -ldflags "$(LDFLAGS)" ./cmd/extauthz serve --log-format text

include mk/proto.mk

.PHONY: test
test: deps proto-check ## Run every test with the race detector (what CI runs).
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	@$(GO) tool staticcheck ./...
	$(GO) test -race -count=1 ./...

.PHONY: bench
bench: ## Run the hot-path benchmarks with allocation counts.
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./internal/...

.PHONY: scale
scale: ## Fill the verdict cache with 1,000,000 tokens under a 1 GiB limit: RSS and hit throughput before and after.
	EXTAUTHZ_SCALE=1000000 $(GO) test -run '^TestScale$$' -count=1 -v -timeout 30m ./internal/envoyauthz

.PHONY: loadtest
loadtest: build ## Compare the service with a do-nothing ext_authz server over gRPC.
	$(BIN)/extauthz-loadtest -extauthz $(BIN)/extauthz -enforce

.PHONY: fuzz
fuzz: ## Run each fuzz target for 20s.
	@for pkg in $$($(GO) list ./internal/...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime 20s $$pkg || exit 1; \
	  done; \
	done

.PHONY: lint
lint: ## gofmt, go vet and staticcheck (pinned in go.mod's tool block).
	@test -z "$$(gofmt -l .)" || (gofmt -l .; exit 1)
	$(GO) vet ./...
	@$(GO) tool staticcheck ./...
