package db_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/testdb"
)

// Translate's ErrUnavailable, against the real server: the errors a lost,
// refused, shutting-down or read-only database gives, and none of the
// errors that are not the database's unavailability.
func TestTranslateUnavailable(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := t.Context()

	// Refused: nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := ln.Addr().String()
	require.NoError(t, ln.Close())
	_, err = db.Open(ctx, "postgres://postgres@"+closed+"/x?sslmode=disable")
	require.True(t, db.IsUnavailable(err), "refused: %v", err)

	// 57P01 admin_shutdown: the backend is terminated under the connection.
	conn, err := d.Pool.Acquire(ctx)
	require.NoError(t, err)
	pid := conn.Conn().PgConn().PID()
	_, err = d.Pool.Exec(ctx, "SELECT pg_terminate_backend($1)", pid)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SELECT 1")
	conn.Release()
	require.True(t, db.IsUnavailable(err), "terminated: %v", err)
	require.ErrorIs(t, db.Translate(err), db.ErrUnavailable)

	// 25006 read_only_sql_transaction, as a demoted primary answers: the
	// error is unavailable and the connection is discarded, not reused.
	conn, err = d.Pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "SET default_transaction_read_only = on")
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE TABLE written (id int)")
	require.True(t, db.IsUnavailable(err), "read-only: %v", err)
	require.True(t, conn.Conn().IsClosed(), "the read-only connection is discarded")
	conn.Release()

	// Not unavailable: the server's other errors, a cancelled caller, a
	// bare deadline (anyone's), an HTTP client's network error.
	_, err = d.Pool.Exec(ctx, "SELEKT 1")
	require.Error(t, err)
	require.False(t, db.IsUnavailable(err), "syntax error: %v", err)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = d.Pool.Exec(cctx, "SELECT 1")
	require.False(t, db.IsUnavailable(err), "cancelled: %v", err)
	require.False(t, db.IsUnavailable(fmt.Errorf("provider charge: not called: %w", context.DeadlineExceeded)))
	httpErr := &url.Error{Op: "Post", URL: "http://provider/v1/charges", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	require.False(t, db.IsUnavailable(httpErr), "a provider's network error is not the database's")
	var row int
	err = d.Pool.QueryRow(ctx, "SELECT 1 WHERE false").Scan(&row)
	require.ErrorIs(t, db.Translate(err), db.ErrNotFound)
	require.False(t, db.IsUnavailable(err))
	require.Nil(t, db.Translate(nil))
}

// A transaction that cannot get a connection within its deadline (the pool
// is exhausted, or every connect hangs) is ErrUnavailable.
func TestWithTxAcquireTimeoutIsUnavailable(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	cfg, err := pgxpool.ParseConfig(d.URL)
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	held, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	defer held.Release()

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err = db.WithTx(ctx, &db.Pool{Pool: pool}, func(pgx.Tx) error { return nil })
	require.ErrorIs(t, err, db.ErrUnavailable)
	require.True(t, db.IsUnavailable(err))
}
