package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/acme/paymentsvc/internal/db"
)

// listenRetryMax caps the wait between LISTEN reconnects. While the
// connection is down every event waits for a poll, and a failed attempt
// costs the database little, so the relay reconnects within seconds of the
// database coming back, whatever the outage's length. The connection's
// settings are the pool's: with several hosts and
// target_session_attrs=read-write it finds the new primary after a failover.
const listenRetryMax = 5 * time.Second

// listen keeps a connection LISTENing on channel "outbox" and signals wake
// on every notification, reconnecting with backoff until ctx ends. While it
// is down the relay still polls, only later. Once it listens again after a
// failure it signals up: the database is back, so the relay need not sit
// out the rest of its own backoff.
func (r *Relay) listen(ctx context.Context, wake, up chan<- struct{}) {
	failures := 0
	for {
		err := r.listenOnce(ctx, wake, func() {
			if failures > 0 {
				r.log.Info("outbox LISTEN connection restored", "failures", failures)
				signal(up)
			}
			failures = 0
		})
		if ctx.Err() != nil {
			return
		}
		failures++
		d := backoff(failures, r.cfg.BackoffMin, min(r.cfg.BackoffMax, listenRetryMax))
		r.log.Warn("outbox LISTEN connection failed; polling only", "err", err, "retry_in", d)
		if !sleep(ctx, d) {
			return
		}
	}
}

// listenOnce uses its own connection rather than one of the pool's: a
// LISTENing session must not go back to the pool, and a relay should not
// hold one of the slots the API needs. It has the pool's settings (its
// dial's keepalives and TCP_USER_TIMEOUT included), and each of its waits
// on the database is bounded by the pool's DATABASE_TIMEOUT: the connect,
// the LISTEN, and a ping whenever no notification came for ListenPing,
// which finds a session whose server went silent (a partition leaves it
// open and quiet, which looks just like no payment happening).
func (r *Relay) listenOnce(ctx context.Context, wake chan<- struct{}, listening func()) error {
	cctx, cancel := r.pool.Bound(ctx)
	conn, err := pgx.ConnectConfig(cctx, r.pool.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := r.pool.Bound(context.WithoutCancel(ctx))
		defer cancel()
		_ = conn.Close(cctx)
	}()
	lctx, cancel := r.pool.Bound(ctx)
	err = db.Q.OutboxListen(lctx, conn)
	cancel()
	if err != nil {
		return err
	}
	listening()
	signal(wake) // rows committed while nobody listened would wait for a poll
	for {
		wctx, cancel := context.WithTimeout(ctx, r.cfg.ListenPing)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			signal(wake)
		case ctx.Err() != nil:
			return ctx.Err()
		case !pgconn.Timeout(err):
			return err
		default: // quiet for ListenPing: is the server still there?
			pctx, cancel := r.pool.Bound(ctx)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping of the LISTEN session: %w", err)
			}
		}
	}
}
