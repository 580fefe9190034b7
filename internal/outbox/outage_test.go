package outbox_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestRelaySurvivesNATSOutage stops NATS in the middle of a batch, writes
// more events while it is down, and restarts it on the same port and store:
// every event arrives, once.
func TestRelaySurvivesNATSOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts a NATS server; skipped with -short")
	}
	t.Parallel()
	srv := testkit.StartNATSServer(t)
	b := setup(t, srv.URL)
	ids := b.insertEvents(t, 300)

	cfg := b.cfg
	cfg.BatchSize = 10
	cfg.PublishTimeout = time.Second
	var sent atomic.Int64
	var once sync.Once
	down := make(chan struct{})
	cfg = cfg.WithHooks(outbox.Hooks{BeforePublish: func(string) {
		// Stop the server while the relay has half a batch in flight.
		if sent.Add(1) == 105 {
			once.Do(func() {
				srv.Stop()
				close(down)
			})
		}
	}})
	runRelay(t, newRelay(t, b.db.Pool, cfg))

	select {
	case <-down:
	case <-time.After(30 * time.Second):
		t.Fatalf("the relay sent %d events, never reached the outage", sent.Load())
	}
	ids = append(ids, b.insertEvents(t, 100)...)
	pending, _, err := outbox.Stats(context.Background(), b.db.Pool)
	require.NoError(t, err)
	require.GreaterOrEqual(t, pending, 100, "rows pending during the outage: at least the 100 new ones")

	srv.Start()
	waitDrained(t, b.db.Pool, 60*time.Second)

	requireEachOnce(t, b.js, cfg.Stream, ids)
	requireAllPublished(t, b.db.Pool, 400)
	var retried int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE publish_attempts > 0`).Scan(&retried))
	require.Positive(t, retried, "no row recorded a failed publish, so the outage missed the batch in flight")
	t.Logf("%d rows needed a retry", retried)
}

// TestRelayStartsBeforeNATS points a relay at a server that does not run
// yet: Run keeps going, and publishes once the server comes up.
func TestRelayStartsBeforeNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a NATS server started late; skipped with -short")
	}
	t.Parallel()
	srv := testkit.NewNATSServer(t)
	b := setup(t, testkit.NATSURL()) // for the database; the relay uses srv
	cfg := b.cfg
	cfg.NATSURL = srv.URL
	ids := b.insertEvents(t, 20)

	runRelay(t, newRelay(t, b.db.Pool, cfg))
	srv.Start()
	waitDrained(t, b.db.Pool, 60*time.Second)

	_, js := testkit.JetStream(t, srv.URL)
	requireEachOnce(t, js, cfg.Stream, ids)
}

// TestRelayRecreatesDeletedStream deletes the stream under a running relay
// (as a server that lost its store would): the relay creates it again and
// the next events arrive.
func TestRelayRecreatesDeletedStream(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server of its own; skipped with -short")
	}
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	runRelay(t, newRelay(t, b.db.Pool, b.cfg))
	first := b.insertEvents(t, 10)
	waitDrained(t, b.db.Pool, 30*time.Second)
	requireEachOnce(t, b.js, b.cfg.Stream, first)

	require.NoError(t, b.js.DeleteStream(context.Background(), b.cfg.Stream))
	second := b.insertEvents(t, 10)
	waitDrained(t, b.db.Pool, 30*time.Second)
	requireEachOnce(t, b.js, b.cfg.Stream, second)
}
