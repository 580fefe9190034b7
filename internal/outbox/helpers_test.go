package outbox_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// bundle is one test's database with a tenant, JetStream and relay configuration.
type bundle struct {
	db       *testdb.DB
	nc       *nats.Conn
	js       jetstream.JetStream
	cfg      outbox.Config
	tenantID string
}

// setup gives t a fresh database and a stream of its own on the NATS server
// at url, so tests and packages running in parallel never see each other's
// events. It fails (never skips) when Postgres or NATS is unreachable.
func setup(t testing.TB, url string) *bundle {
	t.Helper()
	tdb := testdb.New(t)
	nc, js := testkit.JetStream(t, url)
	suffix := testkit.RandomID("")
	cfg := outbox.Config{
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
	return &bundle{db: tdb, nc: nc, js: js, cfg: cfg, tenantID: testdb.Tenant(t, tdb.Pool, testdb.TenantOpts{}).ID}
}

// testLogger logs warnings and errors through t, so a failing test shows
// what the relay saw.
func testLogger(t testing.TB) *slog.Logger { return testkit.Logger(t) }

// newRelay builds a relay on pool with cfg, failing t on error.
func newRelay(t testing.TB, pool *db.Pool, cfg outbox.Config) *outbox.Relay {
	t.Helper()
	r, err := outbox.NewRelay(pool, cfg)
	require.NoError(t, err, "NewRelay")
	return r
}

// runRelay runs r until the returned stop is called or t ends; stop waits
// for Run to return and requires it to return nil (testkit.Background).
func runRelay(t testing.TB, r *outbox.Relay) (stop func()) {
	t.Helper()
	return testkit.Background(t, r.Run)
}

// insertEvents seeds n SUCCEEDED payments of b's tenant with their
// PaymentSucceeded outbox rows, written by attempts.Transition in one
// transaction that notifies the relays, and returns the event ids in the
// payments' order.
func (b *bundle) insertEvents(t testing.TB, n int) []string {
	t.Helper()
	payments := testdb.Attempts(t, b.db.Pool, testdb.AttemptsOpts{
		TenantID: b.tenantID, Prefix: testkit.RandomID("pay_") + "_", N: n,
		Statuses: []attempts.Status{attempts.Succeeded}, Outbox: true,
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rows, err := b.db.Pool.Query(ctx, `SELECT payment_id, id FROM outbox WHERE payment_id = ANY($1)`, payments)
	require.NoError(t, err)
	byPayment := map[string]string{}
	for rows.Next() {
		var payment, event string
		require.NoError(t, rows.Scan(&payment, &event))
		byPayment[payment] = event
	}
	require.NoError(t, rows.Err())
	ids := make([]string, n)
	for i, p := range payments {
		ids[i] = byPayment[p]
		require.NotEmpty(t, ids[i], "outbox row of %s", p)
	}
	return ids
}

// waitDrained waits until no outbox row of pool is unpublished.
func waitDrained(t testing.TB, pool *db.Pool, timeout time.Duration) {
	t.Helper()
	testkit.Eventually(t, timeout, "every outbox row published", func() bool {
		pending, _, err := outbox.Stats(context.Background(), pool)
		require.NoError(t, err, "outbox stats")
		return pending == 0
	})
}

// streamEvents reads every message of stream and returns how often each
// event id occurs, checking that the Nats-Msg-Id header and the CloudEvents
// id agree; envelopes come back in stream order.
func streamEvents(t testing.TB, js jetstream.JetStream, stream string) (map[string]int, []outbox.Envelope) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err, "stream %s", stream)
	info, err := s.Info(ctx)
	require.NoError(t, err, "stream info")
	want := int(info.State.Msgs)
	counts := map[string]int{}
	var envs []outbox.Envelope
	if want == 0 {
		return counts, envs
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err, "ordered consumer")
	for len(envs) < want {
		batch, err := cons.Fetch(want-len(envs), jetstream.FetchMaxWait(5*time.Second))
		require.NoError(t, err, "fetch")
		n := 0
		for m := range batch.Messages() {
			n++
			var env outbox.Envelope
			require.NoError(t, json.Unmarshal(m.Data(), &env), "message %q is not an envelope", m.Data())
			require.Equal(t, env.ID, m.Headers().Get(jetstream.MsgIDHeader), "Nats-Msg-Id and CloudEvents id")
			counts[env.ID]++
			envs = append(envs, env)
		}
		require.NoError(t, batch.Error(), "fetch")
		require.NotZero(t, n, "stream %s holds %d messages, read %d", stream, want, len(envs))
	}
	return counts, envs
}

// requireEachOnce checks that the stream holds exactly the events ids, each once.
func requireEachOnce(t testing.TB, js jetstream.JetStream, stream string, ids []string) {
	t.Helper()
	counts, envs := streamEvents(t, js, stream)
	require.Len(t, envs, len(ids), "messages in the stream")
	for _, id := range ids {
		require.Equal(t, 1, counts[id], "copies of event %s in the stream", id)
	}
	require.Len(t, counts, len(ids), "distinct events in the stream")
}

// requireAllPublished checks that the outbox holds want rows, every one
// with published_at set.
func requireAllPublished(t testing.TB, pool *db.Pool, want int) {
	t.Helper()
	var published, total int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE published_at IS NOT NULL), count(*) FROM outbox`).Scan(&published, &total))
	require.Equal(t, want, total, "outbox rows")
	require.Equal(t, want, published, "published outbox rows")
}
