package delivery_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/delivery"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// benchConfig is the pod's default configuration, but for the local
// receivers (loopback, http://).
func benchConfig() delivery.Config {
	return delivery.Config{AllowPrivate: true, AllowHTTP: true}
}

// BenchmarkDrainBacklog: a backlog of 50,000 pending deliveries to one
// fast local endpoint, drained by one deliverer with the default settings
// (the goal: at least 2,000 deliveries a second on a 2-core machine). It
// reports deliveries/s as the receiver got them and as they were recorded
// delivered. See docs/BENCHMARKS.md.
func BenchmarkDrainBacklog(b *testing.B) {
	const backlog = 50_000
	for range b.N {
		b.StopTimer()
		bn := setup(b)
		var got atomic.Int64
		rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			got.Add(1)
			w.WriteHeader(http.StatusNoContent)
		}))
		ep := bn.endpoint(rc.URL)
		for range backlog / 5_000 {
			bn.publishN(5_000)
		}
		require.Equal(b, backlog, bn.count(`SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1`, ep.ID))
		b.StartTimer()

		start := time.Now()
		stop := bn.deliver(benchConfig())
		for got.Load() < backlog {
			time.Sleep(10 * time.Millisecond) // the measurement's tick, not a test's wait
		}
		received := time.Since(start)
		for bn.count(`SELECT count(*) FROM webhook_deliveries WHERE status = 'delivered'`) < backlog {
			time.Sleep(10 * time.Millisecond)
		}
		recorded := time.Since(start)
		b.StopTimer()
		stop()
		rc.Close()
		require.EqualValues(b, backlog, got.Load(), "each delivery once")
		b.ReportMetric(backlog/received.Seconds(), "received/s")
		b.ReportMetric(backlog/recorded.Seconds(), "recorded/s")
		b.ReportMetric(0, "ns/op")
	}
}

// BenchmarkHangingReceiver: one tenant with four endpoints, one of which
// accepts connections and never answers (hanging; baseline: it answers like
// the others), the others fast. Payments succeed at a steady rate for 30 s
// and go the whole way: outbox, the relay (JetStream), the fan-out, the
// deliverer, all with the default settings (MERCHANT_WEBHOOK_TIMEOUT 15 s).
// It reports the healthy endpoints' delivery delay, from the commit of the
// payment's transaction to the endpoint's receipt, at p50, p99 and the
// maximum; the goal is a p99 under 1 s with one receiver hanging. See
// docs/BENCHMARKS.md.
func BenchmarkHangingReceiver(b *testing.B) {
	b.Run("hanging", func(b *testing.B) { benchHanging(b, true) })
	b.Run("baseline", func(b *testing.B) { benchHanging(b, false) })
}

func benchHanging(b *testing.B, hanging bool) {
	const (
		duration = 30 * time.Second
		perTick  = 10
		tick     = 100 * time.Millisecond // 100 payments/s, 300 healthy deliveries/s
	)
	for range b.N {
		b.StopTimer()
		bn := setup(b)
		var mu sync.Mutex
		var delays []time.Duration
		committed := map[string]time.Time{} // payment id → its transaction committed
		healthy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			now := time.Now()
			var ev struct {
				Data struct {
					ID string `json:"id"`
				} `json:"data"`
			}
			body, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(body, &ev)
			mu.Lock()
			if t0, ok := committed[ev.Data.ID]; ok && r.URL.Path != "/d" {
				delays = append(delays, max(0, now.Sub(t0)))
			}
			mu.Unlock()
			w.WriteHeader(http.StatusOK)
		}))
		var hang *hangingServer
		if hanging {
			hang = newHangingServer(b)
			bn.endpoint(hang.URL())
		} else {
			bn.endpoint(healthy.URL + "/d")
		}
		for _, p := range []string{"/a", "/b", "/c"} {
			bn.endpoint(healthy.URL + p)
		}
		relay := benchRelay(b, bn)
		testkit.Background(b, relay.Run)
		bn.deliver(benchConfig())
		b.StartTimer()

		deadline := time.Now().Add(duration)
		n := 0
		for time.Now().Before(deadline) {
			t0 := time.Now()
			ids := testdb.Attempts(b, bn.db.Pool, testdb.AttemptsOpts{
				TenantID: bn.tenant, Prefix: testkit.RandomID("pay_") + "_", N: perTick,
				Statuses: []attempts.Status{attempts.Succeeded}, Outbox: true,
			})
			at := time.Now()
			mu.Lock()
			for _, id := range ids {
				committed[id] = at
			}
			mu.Unlock()
			n += perTick
			time.Sleep(max(0, tick-time.Since(t0))) // the load's pace
		}
		for {
			mu.Lock()
			have := len(delays)
			mu.Unlock()
			if have >= 3*n {
				break
			}
			time.Sleep(10 * time.Millisecond) // the measurement's tick
		}
		b.StopTimer()
		mu.Lock()
		slices.Sort(delays)
		p := func(q float64) float64 { return float64(delays[int(q*float64(len(delays)-1))].Milliseconds()) }
		b.ReportMetric(float64(n)/duration.Seconds(), "payments/s")
		b.ReportMetric(p(0.5), "p50_ms")
		b.ReportMetric(p(0.99), "p99_ms")
		b.ReportMetric(float64(delays[len(delays)-1].Milliseconds()), "max_ms")
		if hang != nil {
			b.ReportMetric(float64(hang.accepted.Load()), "hanging_conns")
		}
		b.ReportMetric(0, "ns/op")
		mu.Unlock()
		healthy.Close()
	}
}

// benchRelay is an outbox relay with the fan-out, on a stream of its own
// on the machine's NATS server.
func benchRelay(b *testing.B, bn *bundle) *outbox.Relay {
	b.Helper()
	natsURL := testkit.NATSURL()
	_, js := testkit.JetStream(b, natsURL)
	suffix := testkit.RandomID("")
	cfg := outbox.Config{
		NATSURL: natsURL, Stream: "PAYMENTS_B" + suffix, StreamSubjects: []string{"b" + suffix + ".payments.>"},
		SubjectPrefix: "b" + suffix + ".", Fanout: delivery.NewFanout(nil), Logger: testkit.Logger(b),
	}
	b.Cleanup(func() { _ = js.DeleteStream(context.Background(), cfg.Stream) })
	r, err := outbox.NewRelay(bn.db.Pool, cfg)
	require.NoError(b, err)
	return r
}

// BenchmarkFanout is what the merchant webhooks add to an outbox relay
// batch: the fan-out of 100 published events of one tenant to its two
// endpoints (200 deliveries), in the batch's transaction. One op is one
// batch.
func BenchmarkFanout(b *testing.B) {
	bn := setup(b)
	bn.endpoint("https://shop.example/a")
	bn.endpoint("https://shop.example/b")
	events := make([]event, 100)
	b.ResetTimer()
	for range b.N {
		bn.publish(events...)
	}
	b.StopTimer()
	require.Equal(b, 200*b.N, bn.count(`SELECT count(*) FROM webhook_deliveries`))
}
