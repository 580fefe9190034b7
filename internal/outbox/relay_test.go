package outbox_test

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/metrics"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testkit"
)

func TestRelayPublishesEveryRowOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	ids := b.insertEvents(t, 500)

	pending, oldest, err := outbox.Stats(context.Background(), b.db.Pool)
	require.NoError(t, err)
	require.Equal(t, 500, pending, "pending before")
	require.GreaterOrEqual(t, oldest, time.Duration(0))
	publishedBefore := counterValue(t, metrics.OutboxPublished)

	runRelay(t, newRelay(t, b.db.Pool, b.cfg))
	waitDrained(t, b.db.Pool, 30*time.Second)

	requireEachOnce(t, b.js, b.cfg.Stream, ids)
	requireAllPublished(t, b.db.Pool, 500)
	pending, oldest, err = outbox.Stats(context.Background(), b.db.Pool)
	require.NoError(t, err)
	require.Zero(t, pending, "pending after")
	require.Zero(t, oldest, "age of the oldest pending after")
	// Other tests publish too, so only a lower bound holds.
	require.GreaterOrEqual(t, counterValue(t, metrics.OutboxPublished)-publishedBefore, 500.0, "published counter rise")
	var attemptsSum int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT sum(publish_attempts) FROM outbox`).Scan(&attemptsSum))
	require.Zero(t, attemptsSum, "failed publish attempts recorded on a healthy run")
}

// TestRelayEnvelope follows one event from Enqueue, in the transaction of
// its payment, to the CloudEvents envelope on the stream.
func TestRelayEnvelope(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	ctx := context.Background()
	ids := b.insertEvents(t, 1)
	var paymentID string
	var createdAt time.Time
	require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT payment_id, created_at FROM outbox WHERE id = $1`, ids[0]).Scan(&paymentID, &createdAt))

	cfg := b.cfg
	cfg.Source = "paymentsvc-test"
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	waitDrained(t, b.db.Pool, 30*time.Second)

	_, envs := streamEvents(t, b.js, cfg.Stream)
	require.Len(t, envs, 1, "events in the stream")
	e := envs[0]
	require.Equal(t, outbox.Envelope{
		SpecVersion: "1.0", ID: ids[0], Source: "paymentsvc-test", Type: "PaymentSucceeded", Time: e.Time,
		DataContentType: "application/json", Subject: paymentID, Data: e.Data,
	}, e)
	tm, err := time.Parse(time.RFC3339, e.Time)
	require.NoError(t, err, "time %q", e.Time)
	require.True(t, tm.Equal(createdAt), "time %s, want created_at %s", tm, createdAt)
	var data struct {
		ID       string `json:"id"`
		TenantID string `json:"tenant_id"`
		Status   string `json:"status"`
		Amount   int64  `json:"amount"`
	}
	require.NoError(t, json.Unmarshal(e.Data, &data), "data")
	require.Equal(t, paymentID, data.ID)
	require.Equal(t, b.tenantID, data.TenantID)
	require.Equal(t, "SUCCEEDED", data.Status)
	require.EqualValues(t, 500, data.Amount)
}

// TestTwoRelaysShareWork runs two relays on one outbox: every row is
// published, by exactly one relay, exactly once.
func TestTwoRelaysShareWork(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	ids := b.insertEvents(t, 500)

	var mu sync.Mutex
	sends := map[string][]int{} // event id → relays that sent it, once per send
	for i := range 2 {
		cfg := b.cfg
		cfg.BatchSize = 20 // many small batches, so the relays interleave
		cfg = cfg.WithHooks(outbox.Hooks{BeforePublish: func(id string) {
			mu.Lock()
			defer mu.Unlock()
			sends[id] = append(sends[id], i)
		}})
		runRelay(t, newRelay(t, b.db.Pool, cfg))
	}
	waitDrained(t, b.db.Pool, 30*time.Second)

	requireEachOnce(t, b.js, b.cfg.Stream, ids)
	requireAllPublished(t, b.db.Pool, 500)
	mu.Lock()
	defer mu.Unlock()
	perRelay := [2]int{}
	for _, id := range ids {
		require.Len(t, sends[id], 1, "relays that sent event %s", id)
		perRelay[sends[id][0]]++
	}
	t.Logf("rows published per relay: %v", perRelay)
}

// TestCrashBetweenPubAckAndMark kills a relay after JetStream acknowledged
// its batch but before the rows were marked: the rows stay due, the next
// relay publishes them again, and JetStream drops every copy.
func TestCrashBetweenPubAckAndMark(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	ids := b.insertEvents(t, 50)

	type crash struct{}
	cfg := b.cfg
	cfg.BatchSize = 50
	cfg = cfg.WithHooks(outbox.Hooks{AfterPublish: func() { panic(crash{}) }})
	r := newRelay(t, b.db.Pool, cfg)
	recovered := make(chan any, 1)
	go func() {
		defer func() { recovered <- recover() }()
		_ = r.Run(context.Background())
	}()
	select {
	case p := <-recovered:
		require.IsType(t, crash{}, p, "the relay ended with the crash")
	case <-time.After(30 * time.Second):
		t.Fatal("relay did not reach the crash point")
	}

	// JetStream has the batch; the outbox still owes all of it.
	counts, _ := streamEvents(t, b.js, cfg.Stream)
	require.Len(t, counts, 50, "events in the stream after the crash")
	var pending, attemptsSum int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*), coalesce(sum(publish_attempts), 0) FROM outbox WHERE published_at IS NULL`).Scan(&pending, &attemptsSum))
	require.Equal(t, 50, pending, "rows pending after the crash")
	require.Zero(t, attemptsSum, "failed attempts recorded after the crash")

	var duplicates atomic.Int64
	cfg = b.cfg.WithHooks(outbox.Hooks{AfterBatch: func(res outbox.BatchResult) { duplicates.Add(int64(res.Duplicates)) }})
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	waitDrained(t, b.db.Pool, 30*time.Second)

	requireEachOnce(t, b.js, cfg.Stream, ids)
	requireAllPublished(t, b.db.Pool, 50)
	require.EqualValues(t, 50, duplicates.Load(), "duplicates JetStream reported on the republish")
}

// TestRelayWakesOnNotify sets a poll interval no test waits for, so only
// NOTIFY outbox can get the rows published. Three rounds, because one
// wake-up may be left over from startup.
func TestRelayWakesOnNotify(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	cfg := b.cfg
	cfg.PollInterval = time.Hour
	var batches atomic.Int64
	cfg = cfg.WithHooks(outbox.Hooks{AfterBatch: func(outbox.BatchResult) { batches.Add(1) }})
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	testkit.Eventually(t, 30*time.Second, "the relay ran a batch", func() bool { return batches.Load() > 0 })

	var ids []string
	for range 3 {
		ids = append(ids, b.insertEvents(t, 1)...)
		waitDrained(t, b.db.Pool, 10*time.Second)
	}
	requireEachOnce(t, b.js, cfg.Stream, ids)
}

func TestRelayReturnsWhenContextEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	stop := runRelay(t, newRelay(t, b.db.Pool, b.cfg))
	stop() // fails the test if Run does not return nil promptly
}

func counterValue(t testing.TB, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}
