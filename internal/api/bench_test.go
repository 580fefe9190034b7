package api_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/tracing"
)

// BenchmarkCreatePayment measures the whole create path over HTTP: auth,
// validation, key acquisition with its attempt, PENDING, the provider call
// (an in-process simulator, no latency), and the completing transaction,
// against the real PostgreSQL. Run: go test -run '^$' -bench CreatePayment ./internal/api
func BenchmarkCreatePayment(b *testing.B) {
	bd := setup(b)
	c := bd.benchClient()
	b.ReportAllocs()
	b.ResetTimer()
	payInParallel(b, c)
}

// BenchmarkReplayPayment measures a retry of a finished payment: the stored
// response is answered without touching the attempt or the provider.
func BenchmarkReplayPayment(b *testing.B) { benchReplay(b, nil) }

// BenchmarkReplayPaymentCached is BenchmarkReplayPayment with the pod's
// replay cache (REPLAY_CACHE_BYTES) and authentication cache: after the
// first replay, no SQL at all.
func BenchmarkReplayPaymentCached(b *testing.B) {
	benchReplay(b, idempotency.NewReplayCache(idempotency.DefaultReplayCacheBytes))
}

func benchReplay(b *testing.B, cache *idempotency.ReplayCache) {
	bd := setupWith(b, setupOptions{replayCache: cache})
	c := bd.benchClient()
	body := `{"order_id":"replay","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`
	require.Equal(b, http.StatusCreated, c.MustPay(b, "replay-1", body).Status)
	var errs firstError
	b.ReportAllocs()
	cpu0 := processCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := c.Pay("replay-1", body)
			errs.check(err, r.Status, "replay")
		}
	})
	require.NoError(b, errs.get())
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "replays/s")
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// payInParallel creates payments through c from parallel goroutines, a new
// order each, until b.N, and reports payments/s.
func payInParallel(b *testing.B, c *proctest.Client) {
	var (
		seq  atomic.Int64
		errs firstError
	)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := seq.Add(1)
			body := fmt.Sprintf(`{"order_id":"bench-%d","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`, n)
			r, err := c.Pay(fmt.Sprintf("bench-%d", n), body)
			errs.check(err, r.Status, "create")
		}
	})
	require.NoError(b, errs.get())
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "payments/s")
}

// benchClient is a client of the tenant that keeps its connections, as a
// checkout's would: the tests' clients open one per request (so a killed pod
// leaves nothing stale), which here would measure dialling, not the service.
func (b *bundle) benchClient() *proctest.Client {
	c := b.client(b.a)
	c.HTTP = &http.Client{Timeout: apiclient.Timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	return c
}

// firstError keeps the first failure of the benchmark's goroutines, which
// must not fail the benchmark themselves.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) check(err error, status int, what string) {
	if err == nil && status != http.StatusCreated {
		err = fmt.Errorf("%s: status %d", what, status)
	}
	if err == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// BenchmarkCreatePaymentTracing is BenchmarkCreatePayment with the provider
// client of the binaries (provider.PooledHTTP), tracing off (the default: no
// SDK, nothing instrumented) and on (every span through the batch processor
// to an exporter that drops them, so the cost measured is the
// instrumentation's, not a collector's). Run:
// go test -run '^$' -bench CreatePaymentTracing ./internal/api
func BenchmarkCreatePaymentTracing(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			if on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				restore := tracing.Install(tp)
				b.Cleanup(func() {
					restore()
					_ = tp.Shutdown(context.Background())
				})
			}
			bd := setupWith(b, setupOptions{providerHTTP: provider.PooledHTTP(provider.DefaultCallTimeout)})
			c := bd.benchClient()
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			payInParallel(b, c)
			// CPU time of this process (API, provider client, simulator;
			// not PostgreSQL's) per payment: steadier than ns/op on a
			// shared machine, and where tracing's cost is.
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
