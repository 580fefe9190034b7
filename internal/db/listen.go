package db

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Listener keeps a session LISTENing for the NOTIFYs of one channel and
// signals Wake on every one, reconnecting with Backoff until its context
// ends: the wake-up of a background worker (the outbox relay, the merchant
// webhooks' deliverer), which still polls while it is down, only later.
type Listener struct {
	// Name names the channel in logs ("outbox LISTEN connection …").
	Name string
	// Listen runs the LISTEN statement (a generated query) on the session.
	Listen func(ctx context.Context, q DBTX) error
	// Wake is signalled on every notification, and once the session
	// listens, since rows committed while nobody listened would otherwise
	// wait for a poll.
	Wake chan<- struct{}
	// Up is signalled when the session listens again after a failure: the
	// database is back, so the worker need not sit out the rest of its own
	// backoff. Nil: not signalled.
	Up chan<- struct{}
	// Backoff is the wait before reconnect number failures+1.
	Backoff func(failures int) time.Duration
	// Ping is how long the session may stay quiet before it is pinged: a
	// partition leaves a session open and silent, which looks just like
	// nothing being committed; a ping that gets no answer within the pool's
	// DATABASE_TIMEOUT replaces the session. 0: DefaultListenPing.
	Ping time.Duration
	Log  *slog.Logger
}

// DefaultListenPing is a Listener's Ping when it sets none.
const DefaultListenPing = 5 * time.Second

// Run listens until ctx ends. The session's settings are pool's: with
// several hosts and target_session_attrs=read-write it finds the new
// primary after a failover.
func (l Listener) Run(ctx context.Context, pool *Pool) {
	if l.Ping <= 0 {
		l.Ping = DefaultListenPing
	}
	failures := 0
	for {
		err := l.once(ctx, pool, func() {
			if failures > 0 {
				l.Log.Info(l.Name+" LISTEN connection restored", "failures", failures)
				if l.Up != nil {
					Signal(l.Up)
				}
			}
			failures = 0
		})
		if ctx.Err() != nil {
			return
		}
		failures++
		d := l.Backoff(failures)
		l.Log.Warn(l.Name+" LISTEN connection failed; polling only", "err", err, "retry_in", d.String())
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// once uses a connection of its own rather than one of the pool's: a
// LISTENing session must not go back to the pool, and a worker should not
// hold one of the slots the API needs. It has the pool's settings (its
// dial's keepalives and TCP_USER_TIMEOUT included), and each of its waits
// on the database is bounded by the pool's DATABASE_TIMEOUT: the connect,
// the LISTEN, and a ping whenever no notification came for Ping.
func (l Listener) once(ctx context.Context, pool *Pool, listening func()) error {
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = ListenerApplicationName(l.Name)
	cctx, cancel := pool.Bound(ctx)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := pool.Bound(context.WithoutCancel(ctx))
		defer cancel()
		_ = conn.Close(cctx)
	}()
	lctx, cancel := pool.Bound(ctx)
	err = l.Listen(lctx, conn)
	cancel()
	if err != nil {
		return err
	}
	listening()
	Signal(l.Wake)
	for {
		wctx, cancel := context.WithTimeout(ctx, l.Ping)
		_, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case err == nil:
			Signal(l.Wake)
		case ctx.Err() != nil:
			return ctx.Err()
		case !pgconn.Timeout(err):
			return err
		default: // quiet for Ping: is the server still there?
			pctx, cancel := pool.Bound(ctx)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return fmt.Errorf("ping of the LISTEN session: %w", err)
			}
		}
	}
}

// ListenerApplicationName is the application_name of the LISTEN session of
// the Listener named name, as pg_stat_activity shows it: the session's last
// query says nothing once it has been pinged.
func ListenerApplicationName(name string) string { return "paymentsvc listen " + name }

// Signal sends on a 1-buffered channel without blocking: one pending
// wake-up stands for any number.
func Signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
