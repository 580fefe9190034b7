package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/testdb"
)

// TestPoolAcquireTimeout: with every connection taken, a query waits the
// acquire timeout, not forever, and says why; once one is free it runs.
func TestPoolAcquireTimeout(t *testing.T) {
	t.Parallel()
	url := testdb.New(t).URL + "&pool_max_conns=1"
	pool, err := db.Open(t.Context(), url)
	require.NoError(t, err)
	defer pool.Close()
	require.EqualValues(t, 1, pool.Config().MaxConns, "pool_max_conns from the URL wins")
	pool.AcquireTimeout = 200 * time.Millisecond

	held, err := pool.Acquire(t.Context())
	require.NoError(t, err)
	start := time.Now()
	var one int
	err = pool.QueryRow(context.Background(), `SELECT 1`).Scan(&one)
	require.ErrorIs(t, err, db.ErrAcquireTimeout)
	require.Less(t, time.Since(start), 10*time.Second)
	_, err = pool.Begin(context.Background())
	require.ErrorIs(t, err, db.ErrAcquireTimeout)

	held.Release()
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT 1`).Scan(&one))
	require.Equal(t, 1, one)
	// Rows read to the end give the connection back: the next query gets it.
	rows, err := pool.Query(context.Background(), `SELECT generate_series(1, 3)`)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		n++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 3, n)
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT 2`).Scan(&one))
	require.Equal(t, 2, one)
}

// TestPoolDefaultSize: without pool_max_conns the pool is sized for
// concurrency, never below 16.
func TestPoolDefaultSize(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t).Pool
	require.Equal(t, db.DefaultMaxConns(), pool.Config().MaxConns)
	require.GreaterOrEqual(t, db.DefaultMaxConns(), int32(16))
}

// Rows and batch results closed twice (a deferred Close after an explicit
// one) give their connection back once: nothing panics, and the one
// connection of the pool serves the next query.
func TestPoolClosingTwiceReleasesOnce(t *testing.T) {
	t.Parallel()
	pool, err := db.Open(t.Context(), testdb.New(t).URL+"&pool_max_conns=1")
	require.NoError(t, err)
	defer pool.Close()
	ctx := t.Context()
	rows, err := pool.Query(ctx, `SELECT generate_series(1, 3)`)
	require.NoError(t, err)
	for rows.Next() {
	}
	rows.Close()
	rows.Close()
	var b pgx.Batch
	b.Queue(`SELECT 1`)
	br := pool.SendBatch(ctx, &b)
	_, err = br.Exec()
	require.NoError(t, err)
	require.NoError(t, br.Close())
	_ = br.Close()
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT 2`).Scan(&n))
	require.Equal(t, 2, n)
	require.EqualValues(t, 1, pool.Stat().TotalConns())
}
