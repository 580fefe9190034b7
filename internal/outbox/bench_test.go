package outbox_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testkit"
)

// BenchmarkRelayThroughput measures how fast relays drain a backlog: each
// iteration commits rowsPerOp outbox rows (untimed) and times until every
// one is published, acknowledged and marked. It runs on the real stack, a
// private nats-server (file storage) and the test PostgreSQL.
func BenchmarkRelayThroughput(b *testing.B) {
	const rowsPerOp = 5000
	for _, bc := range []struct{ batch, relays int }{
		{100, 1}, {500, 1}, {100, 2},
	} {
		b.Run(fmt.Sprintf("batch=%d/relays=%d", bc.batch, bc.relays), func(b *testing.B) {
			srv := testkit.StartNATSServer(b)
			bb := setup(b, srv.URL)
			var published atomic.Int64
			progress := make(chan struct{}, 1)
			for range bc.relays {
				cfg := bb.cfg
				cfg.BatchSize = bc.batch
				cfg = cfg.WithHooks(outbox.Hooks{AfterBatch: func(res outbox.BatchResult) {
					published.Add(int64(res.Published))
					select {
					case progress <- struct{}{}:
					default:
					}
				}})
				runRelay(b, newRelay(b, bb.db.Pool, cfg))
			}

			var busy time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				bb.insertEvents(b, rowsPerOp)
				target := int64(i+1) * rowsPerOp
				start := time.Now()
				b.StartTimer()
				for published.Load() < target {
					select {
					case <-progress:
					case <-time.After(time.Minute):
						b.Fatalf("published %d of %d", published.Load(), target)
					}
				}
				busy += time.Since(start)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N*rowsPerOp)/busy.Seconds(), "events/s")
		})
	}
}
