package outbox

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

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
		r.log.Warn("outbox LISTEN connection failed; polling only", "err", err, "retry_in", d.String())
		if !sleep(ctx, d) {
			return
		}
	}
}

// listenOnce uses its own connection rather than one of the pool's: a
// LISTENing session must not go back to the pool, and a relay should not
// hold one of the slots the API needs.
func (r *Relay) listenOnce(ctx context.Context, wake chan<- struct{}, listening func()) error {
	conn, err := pgx.ConnectConfig(ctx, r.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if err := db.Q.OutboxListen(ctx, conn); err != nil {
		return err
	}
	listening()
	signal(wake) // rows committed while nobody listened would wait for a poll
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		signal(wake)
	}
}
