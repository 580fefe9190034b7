package outbox

import (
	"context"
	"time"

	"github.com/acme/paymentsvc/internal/db"
)

// listenRetryMax caps the wait between LISTEN reconnects. While the
// connection is down every event waits for a poll, and a failed attempt
// costs the database little, so the relay reconnects within seconds of the
// database coming back, whatever the outage's length.
const listenRetryMax = 5 * time.Second

// listen keeps a connection LISTENing on channel "outbox" and signals wake
// on every notification, reconnecting with backoff until ctx ends (see
// db.Listener). While it is down the relay still polls, only later. Once it
// listens again after a failure it signals up: the database is back, so the
// relay need not sit out the rest of its own backoff.
func (r *Relay) listen(ctx context.Context, wake, up chan<- struct{}) {
	db.Listener{
		Name: "outbox", Listen: db.Q.OutboxListen, Wake: wake, Up: up, Log: r.log, Ping: r.cfg.ListenPing,
		Backoff: func(failures int) time.Duration {
			return backoff(failures, r.cfg.BackoffMin, min(r.cfg.BackoffMax, listenRetryMax))
		},
	}.Run(ctx, r.pool)
}
