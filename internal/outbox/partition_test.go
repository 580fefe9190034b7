package outbox_test

import (
	"context"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testkit"
)

// natsFlowBound is §19's: events flow again within 10 s of a silent NATS
// server's return.
const natsFlowBound = 10 * time.Second

// A NATS server that stops answering (its connection held open, no FIN, no
// RST) is noticed by the relay's pings; once it answers again, on new
// connections only, the events written meanwhile reach the stream within
// natsFlowBound, each once.
func TestRelayNoticesASilentNATSServer(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testkit.NATSURL())
	require.NoError(t, err)
	proxy := testkit.StartTCPProxy(t, u.Host)
	b := setup(t, testkit.NATSURL())
	cfg := b.cfg
	cfg.NATSURL = proxy.URL(t, testkit.NATSURL())
	cfg.PingInterval = outbox.DefaultPingInterval
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	before := b.insertEvents(t, 5)
	waitDrained(t, b.db.Pool, 30*time.Second)

	proxy.Blackhole()
	during := b.insertEvents(t, 5)
	// Longer than the relay's pings need to give up on the connection
	// (MaxPingsOutstanding + 1 intervals), so that it is reconnecting when
	// the server returns.
	pings := time.Duration(outbox.MaxPingsOutstanding+2) * cfg.PingInterval
	time.Sleep(pings)
	pending, _, err := outbox.Stats(context.Background(), b.db.Pool)
	require.NoError(t, err)
	require.Equal(t, len(during), pending, "nothing published while the server is silent")

	proxy.HealNewConnections()
	waitDrained(t, b.db.Pool, natsFlowBound)
	requireEachOnce(t, b.js, cfg.Stream, append(before, during...))
}

// published_at is when JetStream acknowledged the row, on the database's
// clock: after everything before the publish (here a slow step between the
// claim and the send) and before everything after the PubAck (a slow step
// before the mark). The PubAck's moment is the relay's, carried over to the
// database's clock to the millisecond, plus the mark's way to the server:
// half the slow step is room enough for both, and neither the claim's
// moment nor the mark's is within it.
func TestPublishedAtIsWhenTheStreamAcknowledged(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	ids := b.insertEvents(t, 1)
	const slow = time.Second
	var sent, acked atomic.Pointer[time.Time]
	dbNow := func() *time.Time {
		var now time.Time
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&now))
		return &now
	}
	cfg := b.cfg.WithHooks(outbox.Hooks{
		BeforePublish: func(string) {
			time.Sleep(slow) // the claim's transaction started before this
			sent.Store(dbNow())
		},
		AfterPublish: func() {
			acked.Store(dbNow())
			time.Sleep(slow) // the mark comes after this
		},
	})
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	waitDrained(t, b.db.Pool, 30*time.Second)

	var publishedAt time.Time
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT published_at FROM outbox WHERE id = $1`, ids[0]).Scan(&publishedAt))
	require.False(t, publishedAt.Before(*sent.Load()), "published_at %s is before the row was sent (%s)", publishedAt, *sent.Load())
	require.False(t, publishedAt.After(acked.Load().Add(slow/2)), "published_at %s is after the PubAck was in (%s)", publishedAt, *acked.Load())
}

// The relay's LISTEN session is pinged when quiet: one whose server went
// silent for good is replaced by a new session, and a NOTIFY wakes the relay
// again (its poll is an hour away).
func TestRelayReplacesASilentListenSession(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	u, err := url.Parse(b.db.URL)
	require.NoError(t, err)
	proxy := testkit.StartTCPProxy(t, u.Host)
	const timeout = time.Second // DATABASE_TIMEOUT of the relay's pool
	pool, err := db.Open(t.Context(), proxy.URL(t, b.db.URL), db.WithTimeout(timeout))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	cfg := b.cfg
	cfg.PollInterval = time.Hour // only a NOTIFY wakes it within the test
	cfg.ListenPing = 200 * time.Millisecond
	runRelay(t, newRelay(t, pool, cfg))

	first := listenerPID(t, b.db.Pool, 0)
	proxy.Blackhole()
	proxy.HealNewConnections() // the session stays silent for good
	second := listenerPID(t, b.db.Pool, first)
	t.Logf("LISTEN session %d went silent, %d listens now", first, second)

	ids := b.insertEvents(t, 3)
	waitDrained(t, b.db.Pool, 30*time.Second)
	requireEachOnce(t, b.js, cfg.Stream, ids)
}

// listenerPID waits for a LISTEN session other than not and returns its pid.
func listenerPID(t *testing.T, pool *db.Pool, not int) int {
	t.Helper()
	var pid int
	testkit.Eventually(t, outbox.ListenRetryMax+30*time.Second, "a new LISTEN session", func() bool {
		pid = 0
		_ = pool.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $2
			AND pid <> $1 ORDER BY backend_start DESC LIMIT 1`, not, db.ListenerApplicationName("outbox")).Scan(&pid)
		return pid != 0
	})
	return pid
}
