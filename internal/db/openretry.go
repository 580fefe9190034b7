package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Bounds of OpenRetry's backoff between tries.
const (
	openRetryMin = 200 * time.Millisecond
	openRetryMax = 2 * time.Second
)

// OpenRetry is Open for a job that may start while the database fails
// over. For a few seconds no host accepts writes: the old primary is gone
// or shutting down, the standby not promoted yet, or a server is starting
// up. While a server answers like that, OpenRetry tries again with jittered
// backoff until it connects or ctx ends (ctx is the bound). Any other error,
// including no server answering at all, is returned at once: waiting would
// only delay the job's failure. opts are Open's.
func OpenRetry(ctx context.Context, databaseURL string, log *slog.Logger, opts ...Option) (*Pool, error) {
	if _, err := pgxpool.ParseConfig(databaseURL); err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	wait := openRetryMin
	for try := 1; ; try++ {
		pool, err := Open(ctx, databaseURL, opts...)
		if err == nil {
			if try > 1 {
				log.Info("database reachable", "tries", try)
			}
			return pool, nil
		}
		if !retryableOpen(err) || ctx.Err() != nil {
			return nil, err
		}
		d := wait/2 + rand.N(wait/2+1)
		log.Warn("database not reachable yet; retrying", "err", err, "try", try, "retry_in", d.String())
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		wait = min(2*wait, openRetryMax)
	}
}

// createdWait bounds waitCreated.
const createdWait = 30 * time.Second

// waitCreated waits until the database of cfg, just created on the primary,
// can be connected to as cfg says. With several hosts, a standby listed
// before the primary answers "database does not exist" (3D000) until it has
// replayed the creation (a synchronous commit waits for the standby to store
// it, not to apply it), and pgx, like libpq, tries no further host after
// that answer: without the wait, a pod that created the database could fail
// to open it a moment later.
func waitCreated(ctx context.Context, cfg *pgx.ConnConfig) error {
	ctx, cancel := context.WithTimeout(ctx, createdWait)
	defer cancel()
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			return conn.Close(ctx)
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "3D000" {
			return fmt.Errorf("connect to the new database: %w", err)
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("connect to the new database: %w", err)
		case <-t.C:
		}
	}
}

// retryableOpen reports whether a failed Open is what a failover in
// progress looks like: a host answered that it does not take writes
// (target_session_attrs=read-write found a standby), or refused the session
// because it is shutting down or starting up.
func retryableOpen(err error) bool {
	if errors.Is(err, pgconn.ErrReadOnlyConnection) {
		return true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return true
	}
	return false
}
