package outbox

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRelaySurvivesNATSOutage stops NATS in the middle of a batch, writes
// more events while it is down, and restarts it on the same port and store:
// every event arrives, once.
func TestRelaySurvivesNATSOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts a NATS server; skipped with -short")
	}
	t.Parallel()
	srv := startNATSServer(t)
	b := setup(t, srv.URL)
	ids := insertEvents(t, b.db.Pool, 300)

	cfg := b.cfg
	cfg.BatchSize = 10
	cfg.PublishTimeout = time.Second
	var sent atomic.Int64
	var once sync.Once
	down := make(chan struct{})
	cfg.hooks.beforePublish = func(string) {
		// Stop the server while the relay has half a batch in flight.
		if sent.Add(1) == 105 {
			once.Do(func() {
				srv.stop()
				close(down)
			})
		}
	}
	runRelay(t, newRelay(t, b.db.Pool, cfg))

	select {
	case <-down:
	case <-time.After(30 * time.Second):
		t.Fatalf("the relay sent %d events, never reached the outage", sent.Load())
	}
	ids = append(ids, insertEvents(t, b.db.Pool, 100)...)
	pending, _, err := Stats(context.Background(), b.db.Pool)
	if err != nil || pending < 100 {
		t.Fatalf("during the outage %d rows pending (%v), want at least the 100 new ones", pending, err)
	}

	srv.start()
	waitDrained(t, b.db.Pool, 60*time.Second)

	assertEachOnce(t, b.js, cfg.Stream, ids)
	assertAllPublished(t, b.db.Pool, 400)
	var retried int
	if err := b.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE publish_attempts > 0`).Scan(&retried); err != nil {
		t.Fatal(err)
	}
	if retried == 0 {
		t.Error("no row recorded a failed publish, so the outage missed the batch in flight")
	}
	t.Logf("%d rows needed a retry", retried)
}

// TestRelayStartsBeforeNATS points a relay at a server that does not run
// yet: Run keeps going, and publishes once the server comes up.
func TestRelayStartsBeforeNATS(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a NATS server started late; skipped with -short")
	}
	t.Parallel()
	srv := newNATSServer(t)
	b := setup(t, sharedNATSURL()) // for the database; the relay uses srv
	cfg := b.cfg
	cfg.NATSURL = srv.URL
	ids := insertEvents(t, b.db.Pool, 20)

	runRelay(t, newRelay(t, b.db.Pool, cfg))
	srv.start()
	waitDrained(t, b.db.Pool, 60*time.Second)

	_, js := connectJS(t, srv.URL)
	assertEachOnce(t, js, cfg.Stream, ids)
}

// TestRelayRecreatesDeletedStream deletes the stream under a running relay
// (as a server that lost its store would): the relay creates it again and
// the next events arrive.
func TestRelayRecreatesDeletedStream(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a NATS server of its own; skipped with -short")
	}
	t.Parallel()
	b := setup(t, sharedNATSURL())
	runRelay(t, newRelay(t, b.db.Pool, b.cfg))
	first := insertEvents(t, b.db.Pool, 10)
	waitDrained(t, b.db.Pool, 30*time.Second)
	assertEachOnce(t, b.js, b.cfg.Stream, first)

	if err := b.js.DeleteStream(context.Background(), b.cfg.Stream); err != nil {
		t.Fatal(err)
	}
	second := insertEvents(t, b.db.Pool, 10)
	waitDrained(t, b.db.Pool, 30*time.Second)
	assertEachOnce(t, b.js, b.cfg.Stream, second)
}
