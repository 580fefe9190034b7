package outbox

import (
	"context"
	"testing"
	"time"
)

// TestRelayListensAgainAfterItsConnectionDies kills the relay's LISTEN
// session, as a failover does: the relay opens a new one by itself, and a
// NOTIFY wakes it again long before its next poll.
func TestRelayListensAgainAfterItsConnectionDies(t *testing.T) {
	t.Parallel()
	b := setup(t, sharedNATSURL())
	cfg := b.cfg
	cfg.PollInterval = time.Hour // only a NOTIFY wakes it within the test
	runRelay(t, newRelay(t, b.db.Pool, cfg))
	ctx := context.Background()

	listener := func() (pid int) {
		_ = b.db.Pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND rtrim(query, E'\n; ') LIKE '%LISTEN outbox'
			AND query NOT LIKE '%pg_stat_activity%'`).Scan(&pid)
		return pid
	}
	first := waitValue(t, 10*time.Second, "a LISTEN session", listener)
	if _, err := b.db.Pool.Exec(ctx, "SELECT pg_terminate_backend($1)", first); err != nil {
		t.Fatal(err)
	}
	second := waitValue(t, listenRetryMax+10*time.Second, "a new LISTEN session", func() int {
		if pid := listener(); pid != first {
			return pid
		}
		return 0
	})
	t.Logf("LISTEN session %d terminated, %d listens now", first, second)

	ids := insertEvents(t, b.db.Pool, 3)
	waitDrained(t, b.db.Pool, 20*time.Second)
	assertEachOnce(t, b.js, cfg.Stream, ids)
}

// waitValue polls f until it returns non-zero, and fails t after timeout.
func waitValue(t *testing.T, timeout time.Duration, what string, f func() int) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if v := f(); v != 0 {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
