# hermes-pipe — run `make help` for the targets.
GO        ?= go
BIN       ?= bin
PKGS      ?= ./...
STATICCHECK ?= $(shell command -v staticcheck 2>/dev/null || echo $(HOME)/go/bin/staticcheck)
GOCYCLO   ?= $(shell command -v gocyclo 2>/dev/null || echo $(HOME)/go/bin/gocyclo)

.PHONY: help build test stress lint bench demo clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build bin/hermes-pipe and bin/fakellm
	$(GO) build -o $(BIN)/hermes-pipe ./cmd/hermes-pipe
	$(GO) build -o $(BIN)/fakellm ./cmd/fakellm

test: ## vet and run every test with the race detector
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

stress: ## make test while busy loops load every CPU (LOOPS=4 by default)
	./scripts/stress-test.sh -n $(or $(LOOPS),4) $(PKGS)

lint: ## gofmt, go vet, staticcheck, and no function over cyclomatic 30 outside tests
	@test -z "$$(gofmt -l . | tee /dev/stderr)" || (echo "gofmt needed on the files above" && exit 1)
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	@$(GOCYCLO) -over 30 -ignore '_test\.go$$|/node_modules/' . || (echo "split the functions above into named steps (cyclomatic 30 at most)" && exit 1)

bench: build ## run the Go benchmarks and the benchmark scripts in scripts/
	$(GO) test -run '^$$' -bench . -benchtime 1x $(PKGS)
	./scripts/bench-generate.sh

demo: build ## start fakellm, run generate on datasets/demo, print stats; leaves nothing running
	./scripts/demo.sh

clean: ## remove build output, the demo and the Quickstart folders
	rm -rf $(BIN) demo-out demo-out-sft quickstart
