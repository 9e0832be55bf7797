# relay — the two commands that matter: `make run` and `make test`.
GO        ?= go
PKGS      ?= ./...
DATA      ?= $(or $(RELAY_DATA),./data)
FUZZTIME  ?= 60s
BENCHTIME ?= 3s
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X relay/realm.Version=$(VERSION)

.PHONY: help build run test test-short test-race lint vet fmt fmt-check bench fuzz mcp-conformance mcp-client mcp-oauth openapi-check clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-15s %s\n", $$1, $$2}'

build: ## build bin/relay
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/relay ./cmd/relay

run: build ## run a realm on an embedded store in ./data, or $RELAY_DATA (http://127.0.0.1:8080)
	./bin/relay serve --data $(DATA)

test: fmt-check vet ## format check, vet and every test
	$(GO) test -count=1 -timeout 15m $(PKGS)

test-short: ## the fast tests only
	$(GO) test -count=1 -short $(PKGS)

test-race: ## every test under the race detector (slow)
	$(GO) test -count=1 -race -timeout 30m $(PKGS)

lint: fmt-check vet ## gofmt, go vet and staticcheck
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

vet: ## go vet
	$(GO) vet $(PKGS)

fmt: ## format the code
	gofmt -w .

fmt-check: ## fail when gofmt would change a file
	@out=$$(gofmt -l . 2>&1); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

bench: ## the Go benchmarks behind docs/BENCHMARKS.md
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count 5 ./protocol ./store | tee docs/bench-latest.txt

fuzz: ## run every fuzz target for FUZZTIME each
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for f in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "== $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

mcp-conformance: ## the official MCP conformance suite against a fresh node (needs the npm registry)
	@GO=$(GO) bash testnet/mcpcheck/run.sh conformance

mcp-client: ## the official MCP TypeScript SDK client against a fresh node (needs the npm registry)
	@GO=$(GO) bash testnet/mcpcheck/run.sh client

mcp-oauth: ## the official MCP TypeScript SDK client through OAuth 2.1 + PKCE against /mcp (needs the npm registry)
	@GO=$(GO) bash testnet/mcpcheck/run.sh oauth

openapi-check: ## validate /openapi.json as OpenAPI 3.1 with openapi-spec-validator (pip install openapi-spec-validator)
	RELAY_OPENAPI_CHECK=1 $(GO) test -count=1 -run '^TestOpenAPI$$' -v ./realm

clean: ## remove build output (not ./data)
	rm -rf bin
