# hermes-pipe — run `make help` for the targets.
GO        ?= go
BIN       ?= bin
PKGS      ?= ./...
# disable_grpc_modules leaves out the Cloud Storage client's Direct
# Connectivity (gRPC's xds and RLS resolvers, used only from inside Google
# Cloud): gs:// output, over HTTP or with ?grpc=true, works the same, and the
# binary is 19 MB smaller and every command starts ~2.3 ms sooner (fewer
# package inits). urfave_cli_no_docs leaves out the CLI library's man page
# and Markdown writers (go-md2man and blackfriday), which hermes-pipe does
# not call: the same --help, ~0.5 ms less start (perf stat -r 40 of
# `hermes-pipe version`). A plain `go build` without
# them works the same too.
TAGS      ?= disable_grpc_modules,urfave_cli_no_docs
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo $(HOME)/go/bin/staticcheck)
GOCYCLO   ?= $(shell command -v gocyclo 2>/dev/null || echo $(HOME)/go/bin/gocyclo)

.PHONY: help build test stress lint bench demo clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build bin/hermes-pipe and bin/fakellm
	$(GO) build -tags '$(TAGS)' -o $(BIN)/hermes-pipe ./cmd/hermes-pipe
	$(GO) build -tags '$(TAGS)' -o $(BIN)/fakellm ./cmd/fakellm

test: ## vet and run every test with the race detector
	$(GO) vet -tags '$(TAGS)' $(PKGS)
	$(GO) test -tags '$(TAGS)' -race -count=1 -timeout 20m $(PKGS)

stress: ## make test while busy loops load every CPU (LOOPS=4 by default)
	./scripts/stress-test.sh -n $(or $(LOOPS),4) $(PKGS)

lint: ## gofmt, go vet, staticcheck, and no function over cyclomatic 30 outside tests
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || (echo "gofmt needed on the files above" && exit 1)
	$(GO) vet -tags '$(TAGS)' $(PKGS)
	$(STATICCHECK) -tags '$(TAGS)' $(PKGS)
	@$(GOCYCLO) -over 30 -ignore '_test\.go$$|/node_modules/' . || (echo "split the functions above into named steps (cyclomatic 30 at most)" && exit 1)

bench: build ## run the Go benchmarks and the benchmark scripts in scripts/
	$(GO) test -tags '$(TAGS)' -run '^$$' -bench . -benchtime 1x $(PKGS)
	./scripts/bench-generate.sh

demo: build ## start fakellm, run generate on datasets/demo, print stats; leaves nothing running
	./scripts/demo.sh

clean: ## remove build output, the demo and the Quickstart folders
	rm -rf $(BIN) demo-out demo-out-sft quickstart
