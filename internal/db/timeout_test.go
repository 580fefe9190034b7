package db_test

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// testTimeout is DATABASE_TIMEOUT in these tests, and bound the contract's
// bound of a wait on a silent database (§19: DATABASE_TIMEOUT + 2 s).
const (
	testTimeout = 2 * time.Second
	bound       = testTimeout + 2*time.Second
)

// silentPool is a pool of a fresh database behind a proxy the test can
// blackhole, with DATABASE_TIMEOUT testTimeout and maxConns connections.
func silentPool(t *testing.T, maxConns int) (*db.Pool, *testkit.TCPProxy) {
	t.Helper()
	d := testdb.New(t)
	u, err := url.Parse(d.URL)
	require.NoError(t, err)
	proxy := testkit.StartTCPProxy(t, u.Host)
	raw := proxy.URL(t, d.URL) + "&pool_max_conns=" + strconv.Itoa(maxConns)
	pool, err := db.Open(t.Context(), raw, db.WithTimeout(testTimeout))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	require.Equal(t, testTimeout, pool.Timeout)
	return pool, proxy
}

// requireUnavailableWithin runs call, which must fail as unavailable within
// bound, and returns its error.
func requireUnavailableWithin(t *testing.T, what string, call func() error) error {
	t.Helper()
	start := time.Now()
	err := call()
	elapsed := time.Since(start)
	require.Error(t, err, what)
	require.True(t, db.IsUnavailable(err), "%s: %v", what, err)
	require.Less(t, elapsed, bound, "%s waited past DATABASE_TIMEOUT + 2s", what)
	return err
}

// While the database stops answering on open connections (no FIN, no
// RST), every kind of call ends as unavailable within DATABASE_TIMEOUT
// (+2s), whatever context it was given: a detached one with no deadline
// included, and a transaction's statements and COMMIT too.
func TestEveryWaitOnASilentDatabaseIsBounded(t *testing.T) {
	t.Parallel()
	pool, proxy := silentPool(t, 4)
	ctx := context.WithoutCancel(t.Context()) // no deadline of its own
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE TEMP TABLE t (n int)`)
	require.NoError(t, err)

	proxy.Blackhole()
	requireUnavailableWithin(t, "a statement of an open transaction", func() error {
		_, err := tx.Exec(ctx, `INSERT INTO t VALUES (1)`)
		return err
	})
	requireUnavailableWithin(t, "its COMMIT, on the connection now closed", func() error { return tx.Commit(ctx) })
	requireUnavailableWithin(t, "Exec", func() error {
		_, err := pool.Exec(ctx, `SELECT 1`)
		return err
	})
	requireUnavailableWithin(t, "QueryRow", func() error {
		var n int
		return pool.QueryRow(ctx, `SELECT 1`).Scan(&n)
	})
	requireUnavailableWithin(t, "Query", func() error {
		rows, err := pool.Query(ctx, `SELECT 1`)
		if err != nil {
			return err
		}
		for rows.Next() {
		}
		rows.Close()
		return rows.Err()
	})
	requireUnavailableWithin(t, "a batch", func() error {
		var p db.Pipeline
		p.Add(func(ctx context.Context, q db.DBTX) error {
			_, err := q.Exec(ctx, `SELECT 1`)
			return err
		})
		return p.Send(ctx, pool)
	})
	requireUnavailableWithin(t, "WithTx", func() error {
		return db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT 1`)
			return err
		})
	})
	requireUnavailableWithin(t, "Ping", func() error { return pool.Ping(ctx) })
}

// A connection that got no answer leaves the pool at once, and so do the
// idle ones: once the database answers again, new calls succeed at once on
// new connections, even though the connections held during the partition
// never carry another byte.
func TestSilentConnectionsAreDiscarded(t *testing.T) {
	t.Parallel()
	pool, proxy := silentPool(t, 2)
	ctx := t.Context()
	// Two idle connections, older than the pool's one-second ping threshold.
	a, err := pool.Acquire(ctx)
	require.NoError(t, err)
	b, err := pool.Acquire(ctx)
	require.NoError(t, err)
	a.Release()
	b.Release()
	require.EqualValues(t, 2, pool.Stat().IdleConns())

	proxy.Blackhole()
	requireUnavailableWithin(t, "a statement on a silent connection", func() error {
		_, err := pool.Exec(ctx, `SELECT 1`)
		return err
	})
	testkit.Eventually(t, bound, "the other idle connection is closed", func() bool {
		return pool.Stat().TotalConns() == 0
	})

	proxy.HealNewConnections()
	for i := range 4 { // more calls than connections: no slot is still held
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT $1::int`, i).Scan(&n), "call %d after healing", i)
		require.Equal(t, i, n)
	}
}

// Once a call of a request stalled, its later calls fail at once with
// ErrStalled (the request answers instead of waiting again); another
// request waits for itself.
func TestStallScopeFailsLaterCallsAtOnce(t *testing.T) {
	t.Parallel()
	pool, proxy := silentPool(t, 4)
	req := db.WithStallScope(t.Context())
	proxy.Blackhole()
	err := requireUnavailableWithin(t, "the first call", func() error {
		_, err := pool.Exec(req, `SELECT 1`)
		return err
	})
	require.NotErrorIs(t, err, db.ErrStalled, "the first call waited itself")
	detached := context.WithoutCancel(req)
	_, err = pool.Exec(detached, `SELECT 1`)
	require.ErrorIs(t, err, db.ErrStalled, "a later call of the request, on a detached context too, does not wait")
	require.True(t, db.IsUnavailable(err))
	err = db.WithTx(req, pool, func(pgx.Tx) error { return nil })
	require.ErrorIs(t, err, db.ErrStalled)

	proxy.Heal()
	_, err = pool.Exec(req, `SELECT 1`)
	require.ErrorIs(t, err, db.ErrStalled, "the request stays answered as unavailable")
	_, err = pool.Exec(db.WithStallScope(t.Context()), `SELECT 1`)
	require.NoError(t, err, "a new request succeeds")
}

// A request whose call found no idle connection, and whose new connection
// got no answer (the connect's own timeout), is stalled too: its next call
// does not connect and wait again.
func TestStallScopeCoversAConnectThatGetsNoAnswer(t *testing.T) {
	t.Parallel()
	pool, proxy := silentPool(t, 4)
	pool.Reset() // no idle connection: the next call connects
	// The connect's own timeout (DATABASE_TIMEOUT) ends the wait, not the
	// wait for a connection.
	pool.AcquireTimeout = 2 * bound
	proxy.Blackhole()
	req := db.WithStallScope(t.Context())
	err := requireUnavailableWithin(t, "a call that connects", func() error {
		_, err := pool.Exec(req, `SELECT 1`)
		return err
	})
	require.NotErrorIs(t, err, db.ErrStalled)
	_, err = pool.Exec(req, `SELECT 1`)
	require.ErrorIs(t, err, db.ErrStalled, "the request's next call does not wait again")
}

// A new connection to a server that accepts and never answers gives up
// within the bound.
func TestConnectingToASilentDatabaseIsBounded(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	u, err := url.Parse(d.URL)
	require.NoError(t, err)
	proxy := testkit.StartTCPProxy(t, u.Host)
	proxy.Blackhole()
	requireUnavailableWithin(t, "Open", func() error {
		pool, err := db.Open(t.Context(), proxy.URL(t, d.URL), db.WithTimeout(testTimeout))
		if err == nil {
			pool.Close()
		}
		return err
	})
}
