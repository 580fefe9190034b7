package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/testdb"
)

// sharedNATSURL is the NATS server of the development machine and CI.
func sharedNATSURL() string {
	if u := os.Getenv("TEST_NATS_URL"); u != "" {
		return u
	}
	return DefaultNATSURL
}

// bundle is one test's database, JetStream and relay configuration.
type bundle struct {
	db  *testdb.DB
	nc  *nats.Conn
	js  jetstream.JetStream
	cfg Config
}

// setup gives t a fresh database and a stream of its own on the NATS server
// at url, so tests and packages running in parallel never see each other's
// events. It fails (never skips) when Postgres or NATS is unreachable.
func setup(t testing.TB, url string) *bundle {
	t.Helper()
	tdb := testdb.New(t)
	nc, js := connectJS(t, url)
	suffix := randomHex(6)
	cfg := Config{
		NATSURL:        url,
		Stream:         "PAYMENTS_T" + suffix,
		StreamSubjects: []string{"t" + suffix + ".payments.>"},
		SubjectPrefix:  "t" + suffix + ".",
		PollInterval:   50 * time.Millisecond,
		BackoffMin:     20 * time.Millisecond,
		BackoffMax:     200 * time.Millisecond,
		PublishTimeout: 2 * time.Second,
		BatchTimeout:   10 * time.Second,
		Logger:         testLogger(t),
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = js.DeleteStream(ctx, cfg.Stream) // a private server may be gone already
	})
	return &bundle{db: tdb, nc: nc, js: js, cfg: cfg}
}

func connectJS(t testing.TB, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect to NATS at %s (is nats-server running with -js?): %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// testLogger logs warnings and errors through t, so a failing test shows
// what the relay saw.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// newRelay builds a relay on b's database with cfg, failing t on error.
func newRelay(t testing.TB, pool *db.Pool, cfg Config) *Relay {
	t.Helper()
	r, err := NewRelay(pool, cfg)
	if err != nil {
		t.Fatalf("NewRelay: %v", err)
	}
	return r
}

// runRelay runs r until the returned stop is called or t ends; stop waits
// for Run to return and checks that it returned nil.
func runRelay(t testing.TB, r *Relay) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return 30s after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// insertEvents writes n SUCCEEDED payments of a new tenant and their
// PaymentSucceeded outbox rows in one transaction that notifies the relays,
// and returns the event ids.
func insertEvents(t testing.TB, pool *db.Pool, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tenant := "ten_" + randomHex(6)
	prefix := "pay_" + randomHex(6)
	ids := make([]string, n)
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		if _, err := tx.Exec(ctx, `INSERT INTO tenants (id, name, api_key_sha256) VALUES ($1, $1, $2)`, tenant, key); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `
			INSERT INTO payment_attempts (id, tenant_id, order_id, idempotency_key, amount, currency,
			                              payment_method, status, provider_charge_id)
			SELECT $1 || '_' || g, $2, 'ord_' || g, 'key_' || g, 1000 + g, 'EUR', 'card', 'SUCCEEDED', 'ch_' || g
			FROM generate_series(1, $3::int) AS g`, prefix, tenant, n)
		if err != nil {
			return err
		}
		for i := range n {
			pid := fmt.Sprintf("%s_%d", prefix, i+1)
			payload, err := json.Marshal(map[string]any{
				"id": pid, "tenant_id": tenant, "order_id": fmt.Sprintf("ord_%d", i+1), "amount": 1001 + i,
				"currency": "EUR", "status": "SUCCEEDED", "provider": "sim",
			})
			if err != nil {
				return err
			}
			ids[i], err = Enqueue(ctx, tx, Event{Type: "PaymentSucceeded", SubjectID: pid, PaymentID: pid, Payload: payload})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("insert %d outbox rows: %v", n, err)
	}
	return ids
}

// waitFor polls cond every 10ms until it holds, failing t with cond's last
// description after timeout.
func waitFor(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, desc := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, desc)
		}
		<-tick.C
	}
}

// waitDrained waits until no outbox row of pool is unpublished.
func waitDrained(t testing.TB, pool *db.Pool, timeout time.Duration) {
	t.Helper()
	waitFor(t, timeout, func() (bool, string) {
		pending, _, err := Stats(context.Background(), pool)
		if err != nil {
			return false, "stats: " + err.Error()
		}
		return pending == 0, fmt.Sprintf("%d outbox rows still unpublished", pending)
	})
}

// streamEvents reads every message of stream and returns how often each
// event id occurs, checking that the Nats-Msg-Id header and the CloudEvents
// id agree; envelopes come back in stream order.
func streamEvents(t testing.TB, js jetstream.JetStream, stream string) (map[string]int, []envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("stream info: %v", err)
	}
	want := int(info.State.Msgs)
	counts := map[string]int{}
	var envs []envelope
	if want == 0 {
		return counts, envs
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatalf("ordered consumer: %v", err)
	}
	for len(envs) < want {
		batch, err := cons.Fetch(want-len(envs), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			var env envelope
			if err := json.Unmarshal(m.Data(), &env); err != nil {
				t.Fatalf("message %q is not an envelope: %v", m.Data(), err)
			}
			if h := m.Headers().Get(jetstream.MsgIDHeader); h != env.ID {
				t.Errorf("Nats-Msg-Id %q, CloudEvents id %q", h, env.ID)
			}
			counts[env.ID]++
			envs = append(envs, env)
		}
		if err := batch.Error(); err != nil {
			t.Fatalf("fetch: %v", err)
		}
		if n == 0 {
			t.Fatalf("stream %s holds %d messages, read %d", stream, want, len(envs))
		}
	}
	return counts, envs
}

// assertEachOnce checks that the stream holds exactly the events ids, each once.
func assertEachOnce(t testing.TB, js jetstream.JetStream, stream string, ids []string) {
	t.Helper()
	counts, envs := streamEvents(t, js, stream)
	if len(envs) != len(ids) {
		t.Errorf("stream holds %d messages, want %d", len(envs), len(ids))
	}
	for _, id := range ids {
		if counts[id] != 1 {
			t.Errorf("event %s is in the stream %d times, want once", id, counts[id])
		}
	}
	if len(counts) != len(ids) {
		t.Errorf("stream holds %d distinct events, want %d", len(counts), len(ids))
	}
}

// assertAllPublished checks that every outbox row has published_at set.
func assertAllPublished(t testing.TB, pool *db.Pool, want int) {
	t.Helper()
	var published, total int
	err := pool.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE published_at IS NOT NULL), count(*) FROM outbox`).Scan(&published, &total)
	if err != nil {
		t.Fatal(err)
	}
	if published != want || total != want {
		t.Errorf("%d of %d outbox rows published, want %d of %d", published, total, want, want)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
