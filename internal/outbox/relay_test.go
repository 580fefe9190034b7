package outbox

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/acme/paymentsvc/internal/metrics"
)

func TestRelayPublishesEveryRowOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, sharedNATSURL())
	ids := insertEvents(t, b.db.Pool, 500)

	pending, oldest, err := Stats(context.Background(), b.db.Pool)
	if err != nil || pending != 500 || oldest < 0 {
		t.Fatalf("Stats before = %d, %s, %v; want 500 pending", pending, oldest, err)
	}
	publishedBefore := counterValue(t, metrics.OutboxPublished)

	runRelay(t, newRelay(t, b.db.Pool, b.cfg))
	waitDrained(t, b.db.Pool, 30*time.Second)

	assertEachOnce(t, b.js, b.cfg.Stream, ids)
	assertAllPublished(t, b.db.Pool, 500)
	pending, oldest, err = Stats(context.Background(), b.db.Pool)
	if err != nil || pending != 0 || oldest != 0 {
		t.Errorf("Stats after = %d, %s, %v; want 0, 0", pending, oldest, err)
	}
	// Other tests publish too, so only a lower bound holds.
	if got := counterValue(t, metrics.OutboxPublished) - publishedBefore; got < 500 {
		t.Errorf("published counter rose by %v, want at least 500", got)
	}
	var attemptsSum int
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT sum(publish_attempts) FROM outbox`).Scan(&attemptsSum); err != nil {
		t.Fatal(err)
	}
	if attemptsSum != 0 {
		t.Errorf("%d failed publish attempts recorded on a healthy run", attemptsSum)
	}
}

// TestRelayEnvelope follows one event from Enqueue, in the transaction of
// its payment, to the CloudEvents envelope on the stream.
func TestRelayEnvelope(t *testing.T) {
	t.Parallel()
	b := setup(t, sharedNATSURL())
	ctx := context.Background()
	ids := insertEvents(t, b.db.Pool, 1)
	var a struct{ ID string }
	var tenant string
	err := b.db.Pool.QueryRow(ctx, `SELECT payment_id, payload->>'tenant_id' FROM outbox WHERE id = $1`, ids[0]).Scan(&a.ID, &tenant)
	if err != nil {
		t.Fatal(err)
	}
	var eventID string
	var createdAt time.Time
	err = b.db.Pool.QueryRow(ctx, `SELECT id, created_at FROM outbox WHERE payment_id = $1`, a.ID).Scan(&eventID, &createdAt)
	if err != nil {
		t.Fatal(err)
	}

	cfg := b.cfg
	cfg.Source = "paymentsvc-test"
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	waitDrained(t, b.db.Pool, 30*time.Second)

	_, envs := streamEvents(t, b.js, cfg.Stream)
	if len(envs) != 1 {
		t.Fatalf("stream holds %d events, want 1", len(envs))
	}
	e := envs[0]
	if e.SpecVersion != "1.0" || e.ID != eventID || e.Source != "paymentsvc-test" || e.Type != "PaymentSucceeded" ||
		e.DataContentType != "application/json" || e.Subject != a.ID {
		t.Errorf("envelope = %+v", e)
	}
	tm, err := time.Parse(time.RFC3339, e.Time)
	if err != nil || !tm.Equal(createdAt) {
		t.Errorf("time %q (%v), want created_at %s", e.Time, err, createdAt)
	}
	var data struct {
		ID       string `json:"id"`
		TenantID string `json:"tenant_id"`
		Status   string `json:"status"`
		Amount   int64  `json:"amount"`
	}
	if err := json.Unmarshal(e.Data, &data); err != nil {
		t.Fatalf("data: %v", err)
	}
	if data.ID != a.ID || data.TenantID != tenant || data.Status != "SUCCEEDED" || data.Amount != 1001 {
		t.Errorf("data = %+v", data)
	}
}

// TestTwoRelaysShareWork runs two relays on one outbox: every row is
// published, by exactly one relay, exactly once.
func TestTwoRelaysShareWork(t *testing.T) {
	t.Parallel()
	b := setup(t, sharedNATSURL())
	ids := insertEvents(t, b.db.Pool, 500)

	var mu sync.Mutex
	sends := map[string][]int{} // event id → relays that sent it, once per send
	for i := range 2 {
		cfg := b.cfg
		cfg.BatchSize = 20 // many small batches, so the relays interleave
		cfg.hooks.beforePublish = func(id string) {
			mu.Lock()
			defer mu.Unlock()
			sends[id] = append(sends[id], i)
		}
		runRelay(t, newRelay(t, b.db.Pool, cfg))
	}
	waitDrained(t, b.db.Pool, 30*time.Second)

	assertEachOnce(t, b.js, b.cfg.Stream, ids)
	assertAllPublished(t, b.db.Pool, 500)
	mu.Lock()
	defer mu.Unlock()
	perRelay := [2]int{}
	for _, id := range ids {
		if len(sends[id]) != 1 {
			t.Errorf("event %s was sent %d times (by relays %v), want once", id, len(sends[id]), sends[id])
			continue
		}
		perRelay[sends[id][0]]++
	}
	t.Logf("rows published per relay: %v", perRelay)
}

// TestCrashBetweenPubAckAndMark kills a relay after JetStream acknowledged
// its batch but before the rows were marked: the rows stay due, the next
// relay publishes them again, and JetStream drops every copy.
func TestCrashBetweenPubAckAndMark(t *testing.T) {
	t.Parallel()
	b := setup(t, sharedNATSURL())
	ids := insertEvents(t, b.db.Pool, 50)

	type crash struct{}
	cfg := b.cfg
	cfg.BatchSize = 50
	cfg.hooks.afterPublish = func() { panic(crash{}) }
	r := newRelay(t, b.db.Pool, cfg)
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		_ = r.Run(context.Background())
	}()
	select {
	case p := <-recovered:
		if _, ok := p.(crash); !ok {
			t.Fatalf("relay ended with %v, want the crash", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("relay did not reach the crash point")
	}

	// JetStream has the batch; the outbox still owes all of it.
	counts, _ := streamEvents(t, b.js, cfg.Stream)
	if len(counts) != 50 {
		t.Fatalf("stream holds %d events after the crash, want 50", len(counts))
	}
	var pending, attemptsSum int
	err := b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*), coalesce(sum(publish_attempts), 0) FROM outbox WHERE published_at IS NULL`).Scan(&pending, &attemptsSum)
	if err != nil {
		t.Fatal(err)
	}
	if pending != 50 || attemptsSum != 0 {
		t.Fatalf("after the crash %d rows pending with %d attempts, want 50 with 0", pending, attemptsSum)
	}

	var duplicates atomic.Int64
	cfg = b.cfg
	cfg.hooks.afterBatch = func(res batchResult) { duplicates.Add(int64(res.duplicates)) }
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	waitDrained(t, b.db.Pool, 30*time.Second)

	assertEachOnce(t, b.js, cfg.Stream, ids)
	assertAllPublished(t, b.db.Pool, 50)
	if got := duplicates.Load(); got != 50 {
		t.Errorf("JetStream reported %d duplicates on the republish, want 50", got)
	}
}

// TestRelayWakesOnNotify sets a poll interval no test waits for, so only
// NOTIFY outbox can get the rows published. Three rounds, because one
// wake-up may be left over from startup.
func TestRelayWakesOnNotify(t *testing.T) {
	t.Parallel()
	b := setup(t, sharedNATSURL())
	cfg := b.cfg
	cfg.PollInterval = time.Hour
	var batches atomic.Int64
	cfg.hooks.afterBatch = func(batchResult) { batches.Add(1) }
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	waitFor(t, 30*time.Second, func() (bool, string) {
		return batches.Load() > 0, "the relay ran no batch"
	})

	var ids []string
	for range 3 {
		ids = append(ids, insertEvents(t, b.db.Pool, 1)...)
		waitDrained(t, b.db.Pool, 10*time.Second)
	}
	assertEachOnce(t, b.js, cfg.Stream, ids)
}

func TestRelayReturnsWhenContextEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, sharedNATSURL())
	stop := runRelay(t, newRelay(t, b.db.Pool, b.cfg))
	stop() // fails the test if Run does not return nil promptly
}

func counterValue(t testing.TB, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
