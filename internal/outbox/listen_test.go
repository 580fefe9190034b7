package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/outbox"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestRelayListensAgainAfterItsConnectionDies kills the relay's LISTEN
// session, as a failover does: the relay opens a new one by itself, and a
// NOTIFY wakes it again long before its next poll.
func TestRelayListensAgainAfterItsConnectionDies(t *testing.T) {
	t.Parallel()
	b := setup(t, testkit.NATSURL())
	cfg := b.cfg
	cfg.PollInterval = time.Hour // only a NOTIFY wakes it within the test
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	ctx := context.Background()

	listener := func() (pid int) {
		_ = b.db.Pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, db.ListenerApplicationName("outbox")).Scan(&pid)
		return pid
	}
	var first, second int
	testkit.Eventually(t, 10*time.Second, "a LISTEN session", func() bool {
		first = listener()
		return first != 0
	})
	_, err := b.db.Pool.Exec(ctx, "SELECT pg_terminate_backend($1)", first)
	require.NoError(t, err)
	testkit.Eventually(t, outbox.ListenRetryMax+10*time.Second, "a new LISTEN session", func() bool {
		second = listener()
		return second != 0 && second != first
	})
	t.Logf("LISTEN session %d terminated, %d listens now", first, second)

	ids := b.insertEvents(t, 3)
	waitDrained(t, b.db.Pool, 20*time.Second)
	requireEachOnce(t, b.js, cfg.Stream, ids)
}
