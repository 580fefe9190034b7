# paymentsvc — see README.md. Quick start: `make run`, `make test`.
GO        ?= go
BIN       := bin
TEST_FLAGS ?= -race -count=1 -timeout 40m

.PHONY: all build run test test-ha test-short soak demo generate sqlc-diff vet fmt-check bench bench-go bench-growth clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

## run: the service with the provider simulator on the local PostgreSQL
run: build
	./scripts/run.sh

## test: every test, with the race detector, against the real PostgreSQL and
## NATS; then the e2e suite again on the Stripe connector against the
## simulator's Stripe face (E2E_PROVIDER_TYPE=stripe), but for E2E_SIM_ONLY
test:
	$(GO) test $(TEST_FLAGS) ./...
	E2E_PROVIDER_TYPE=stripe $(GO) test $(TEST_FLAGS) -skip '$(E2E_SIM_ONLY)' ./e2e/

# The e2e tests that sign and post events in the simulator's own webhook
# format, or call the simulator's own API, themselves: on the Stripe face
# those requests are not Stripe's. Their Stripe counterparts are in
# internal/webhook/stripe_test.go, internal/providersim/stripe_test.go and
# internal/provider/stripe.
E2E_SIM_ONLY := ^(TestLogsHoldNoSecrets|TestTracingExportsRequestSpansOverOTLP|TestWebhooksPerProvider|TestAmbiguousPinsThePayment|TestOpenAPIMatchesRealTraffic|TestMetricsCountWhatHappened|TestRequestLogLines|TestDatabaseOutageAnswers503|TestSettleVoidsAnOrphanAuthorization|TestDatabasePartition)$$

## test-short: the quick tests (no race detector, -short): the e2e package, the
## demo and the tests that run NATS servers or seed big tables skip themselves
test-short:
	$(GO) test -short -count=1 ./...

## soak: mixed load (creates, replays, refunds, captures, voids, webhooks, provider faults, a
## pod restart) through two real pods for SOAK_DURATION (default 10m); fails
## if a pod's memory, threads, goroutines or database connections keep
## growing. SOAK_RATE (operations/s, default 20), SOAK_WORKERS, SOAK_REPORT
## (a file for the figures). make test runs it for a minute, with -race.
SOAK_DURATION ?= 10m
soak:
	SOAK_DURATION=$(SOAK_DURATION) $(GO) test -count=1 -timeout 24h -run '^TestSoak$$' -v ./e2e/soak/

## demo: the four failure scenarios of docs/failure-scenarios.md on two pods, narrated
demo: build
	$(BIN)/demo

generate:
	$(GO) tool sqlc generate

sqlc-diff:
	$(GO) tool sqlc diff

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## bench-go: the Go benchmarks, one iteration each
bench-go:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...

## bench: create and replay through the service (cmd/loadgen) side by side
## with pgbench running the fixed reference SQL (bench/reference), on a
## private PostgreSQL cluster it starts and stops; prints the throughput
## ratios, create's p99, the database cost ratio and WAL per payment.
## BENCH_CLIENTS, BENCH_SECONDS. Not part of CI. See docs/BENCHMARKS.md.
bench:
	./scripts/bench.sh

## bench-growth: the same with 5 million keys and payments loaded, and create
## during reconciler gc. Takes many minutes; not part of CI.
bench-growth:
	./scripts/bench-growth.sh

clean:
	rm -rf $(BIN)

## test-ha: the high-availability tests (build tag ha): a pg_auto_failover
## formation and a 3-node JetStream cluster as real processes, one at a time.
## Needs root, pg_autoctl (postgresql-15-auto-failover) and nats-server.
TEST_HA_FLAGS ?= -count=1 -p 1 -timeout 15m -v
test-ha:
	$(GO) test -tags ha $(TEST_HA_FLAGS) ./e2e/ha/...
