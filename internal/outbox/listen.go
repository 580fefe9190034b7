package outbox

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acme/paymentsvc/internal/db"
)

// listen keeps a connection LISTENing on channel "outbox" and signals wake
// on every notification, reconnecting with backoff until ctx ends. While it
// is down the relay still polls, only later.
func (r *Relay) listen(ctx context.Context, wake chan<- struct{}) {
	failures := 0
	for {
		err := r.listenOnce(ctx, wake, func() { failures = 0 })
		if ctx.Err() != nil {
			return
		}
		failures++
		d := backoff(failures, r.cfg.BackoffMin, r.cfg.BackoffMax)
		r.log.Warn("outbox LISTEN connection failed; polling only", "err", err, "retry_in", d)
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
