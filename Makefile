# kici build and test entry points. `make test` is what CI runs.
GO ?= go
BINARIES := kici-orchestrator kici-agent kici-admin kici
PKG := github.com/kici-dev/kici

.PHONY: build demo test test-short bench fuzz vet clean fakes

# The four binaries of CONTRACT.md, static (CGO_ENABLED=0).
build:
	@mkdir -p bin
	@for b in $(BINARIES); do \
		if [ -d cmd/$$b ]; then \
			echo "go build -o bin/$$b ./cmd/$$b"; \
			CGO_ENABLED=0 $(GO) build -trimpath -o bin/$$b ./cmd/$$b || exit 1; \
		fi; \
	done

# The named fakes of Firecracker and its jailer (internal/fakes/fakevm), for
# hosts without KVM: the firecracker backend runs them like the real ones.
fakes:
	@mkdir -p bin/fakes
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/fakes/firecracker ./cmd/fakes/firecracker
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/fakes/jailer ./cmd/fakes/jailer

# Build, then run examples/hello end to end on a throw-away orchestrator
# (SQLite in a temporary data dir) with one local agent.
demo: build
	./bin/kici-orchestrator demo

# The whole suite. Set KICI_TEST_DATABASE_URL for the PostgreSQL variants
# and KICI_TEST_REQUIRE_SERVICES=1 to turn a missing service into a failure.
test:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

test-short:
	$(GO) test -short ./...

# Micro-benchmarks of internal/..., then the end-to-end harness (real
# orchestrator and agent processes; see docs/benchmarks.md). BENCHFLAGS
# passes flags to the harness, e.g. BENCHFLAGS="-runs 50 -jobs 200".
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/...
	$(GO) run ./bench $(BENCHFLAGS)

# Run every fuzz target for FUZZTIME each (default 60s), one after another.
# Minimising new inputs is off: it stalled FuzzExtract (internal/bundle) for
# minutes at a time, and the corpus keeps the inputs either way.
FUZZTIME ?= 60s
fuzz:
	@set -e; for pkg in $$($(GO) list ./internal/...); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$t"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 0; \
		done; \
	done

clean:
	rm -rf bin
