# strata build, test and run targets. `make help` lists them.
GO      ?= go
BIN     ?= bin
BINARIES := scheduler merger windower walwriter strata pgwire
FUZZTIME ?= 20s
BENCHFLAGS ?=
BENCHTIME ?= 1s

.PHONY: help build test test-chaos test-poison test-postgres test-race demo local bench bench-large bench-deps bench-go lint fuzz clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## build every binary into ./bin
	@mkdir -p $(BIN)
	@for b in $(BINARIES); do \
		if [ -d services/$$b ]; then $(GO) build -o $(BIN)/$$b ./services/$$b || exit 1; fi; \
	done

# The engine suites again with freed memory poisoned (columnar.Poison), so
# a value left pointing into a released buffer reads as garbage at once.
POISONED := ./columnar/... ./merger/... ./windower/... ./internal/bufpool/...

test: build ## run every test (unit, crash, integration), then the engine suites with freed memory poisoned
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 14m ./...
	$(GO) test -count=1 -timeout 10m -tags strata_poison $(POISONED)
	cd bench && $(GO) vet ./... && $(GO) test -count=1 ./...
	@[ "$$STRATA_TEST_POSTGRES" = 1 ] || echo "TestAgainstPostgres skipped: STRATA_TEST_POSTGRES is not 1 (\`make test-postgres\` runs it against a throwaway PostgreSQL 15 cluster)"

test-postgres: build ## windower's random queries (plain and keyed tables with changes) and pgwire's typed rows, against a real PostgreSQL 15 (a throwaway cluster, deploy/postgres.sh)
	deploy/postgres.sh run $(GO) test -count=1 -timeout 10m -v -run '^TestAgainstPostgres(Keyed|Float4Sum|Float8Overflow)?$$' ./windower/
	deploy/postgres.sh run $(GO) test -count=1 -timeout 5m -v -run '^TestPgwireAgainstPostgres$$' ./integration/

# STRATA_CHAOS_SOAK=30m (default 10m) repeats every fault kind until the time
# is up; STRATA_CHAOS_STRICT=1 runs the fault kinds known bugs break too.
test-chaos: build ## soak the chaos suite (faults while work runs) and print its figures
	STRATA_CHAOS_SOAK=$${STRATA_CHAOS_SOAK:-10m} $(GO) test -count=1 -timeout 0 -v -run '^TestChaos' ./integration/

test-poison: ## the engine suites with freed memory poisoned
	$(GO) test -count=1 -timeout 10m -tags strata_poison $(POISONED)

test-race: ## run the unit tests with the race detector
	$(GO) test -race -count=1 -timeout 20m ./...

lint: ## gofmt, go vet, and the import rules of ARCHITECTURE.md (internal/archtest)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1)
	$(GO) vet ./...
	$(GO) test -count=1 ./internal/archtest/

fuzz: ## run every fuzz target for FUZZTIME each
	@for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f"; $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

demo: build ## run every service, load a 200-column table, merge, query, update, print the system tables
	BIN=$(BIN) deploy/demo.sh

local: build ## run a real nats-server and every service as its own process (deploy/local)
	BIN=$(BIN) deploy/local/run.sh

bench: ## strata against DuckDB and PostgreSQL (bench/, its own module); rewrites BENCHMARKS.md
	cd bench && $(GO) run . $(BENCHFLAGS)

# Where make bench-large keeps its 100M-row tables (strata, DuckDB,
# PostgreSQL) between runs: tens of GB.
BENCH_CACHE ?= $(if $(XDG_CACHE_HOME),$(XDG_CACHE_HOME),$(HOME)/.cache)/strata-bench

bench-large: ## the spill suite at 100M rows under a 256MiB grant, data generated once into BENCH_CACHE and reused; BENCHMARKS.md rewritten with it beside make bench's figures
	cd bench && $(GO) run . --large --spill-cache $(BENCH_CACHE) $(BENCHFLAGS)

bench-deps: ## install what `make bench` and the pgwire tests need besides Go (PostgreSQL 15 server, python3-psycopg; Debian, root or sudo)
	bench/deps.sh

bench-go: ## every package's Go benchmarks (figures via b.ReportMetric)
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) ./...

clean: ## remove build output
	rm -rf $(BIN)
