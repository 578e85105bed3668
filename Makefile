# The two commands of the README:
#   make run   — build and run the daemon (go run ./cmd/parley serve)
#   make test  — everything CI checks: formatting, vet, and the race-enabled tests
# Nothing else needs installing on a fresh machine with Go 1.26.

GO ?= go
FUZZTIME ?= 30s

.PHONY: run test vet fmt-check bench fuzz

run:
	$(GO) run ./cmd/parley serve $(ARGS)

test: fmt-check vet
	$(GO) test -race -count=1 ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# Benchmarks quoted in the closing notes.
bench:
	$(GO) test -run XXX -bench . -benchtime 3s ./store/bolt/ ./cmd/parley/internal/daemon/

# Each fuzz target for FUZZTIME (go test -fuzz takes one target at a time).
fuzz:
	$(GO) test -run XXX -fuzz FuzzParse -fuzztime $(FUZZTIME) ./commands/
	$(GO) test -run XXX -fuzz FuzzSplit -fuzztime $(FUZZTIME) ./core/
	$(GO) test -run XXX -fuzz FuzzTail -fuzztime $(FUZZTIME) ./core/
	$(GO) test -run XXX -fuzz FuzzReduce -fuzztime $(FUZZTIME) ./core/
