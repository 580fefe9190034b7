package reconcile_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/reconcile"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// seedAttempts seeds n attempts prefix+i in statuses (cycling), changed
// three days ago, each with a key that expires at now() + expiresIn.
func (b *bundle) seedAttempts(prefix string, n int, statuses []attempts.Status, expiresIn time.Duration) {
	b.t.Helper()
	testdb.Attempts(b.t, b.pool, testdb.AttemptsOpts{
		TenantID: b.tenantID, Prefix: prefix, N: n, Statuses: statuses, Age: 72 * time.Hour, KeyExpiresIn: expiresIn,
	})
}

func (b *bundle) keyIDs() []string {
	b.t.Helper()
	rows, err := b.pool.Query(b.ctx, `SELECT attempt_id FROM idempotency_keys ORDER BY attempt_id`)
	require.NoError(b.t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		require.NoError(b.t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(b.t, rows.Err())
	return out
}

func TestGCDeletesOnlyExpiredKeysOfFinalPayments(t *testing.T) {
	t.Parallel()
	b := setup(t)
	final := []attempts.Status{attempts.Succeeded, attempts.Failed}
	b.seedAttempts("gone_", 10_000, final, -time.Hour)
	// Expired, but their payments are not final: a retry must resume them.
	b.seedAttempts("unresolved_", 6, []attempts.Status{attempts.Created, attempts.Pending, attempts.Unknown}, -time.Hour)
	// Final, but not expired.
	b.seedAttempts("fresh_", 4, final, time.Hour)
	// As autovacuum would have: without statistics, the generic plan that a
	// prepared statement switches to after five runs joins the whole table.
	b.exec(`ANALYZE payment_attempts, idempotency_keys`)

	r := b.reconciler(reconcile.Config{})
	start := time.Now()
	n, err := r.GC(b.ctx)
	took := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, 10_000, n)
	t.Logf("gc deleted %d keys in %s", n, took)
	require.Equal(t, []string{
		"fresh_1", "fresh_2", "fresh_3", "fresh_4",
		"unresolved_1", "unresolved_2", "unresolved_3", "unresolved_4", "unresolved_5", "unresolved_6",
	}, b.keyIDs())

	n, err = r.GC(b.ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}

// With 100,000 final attempts and 100 due ones, the claim reads the partial
// index of unresolved attempts instead of the table.
func TestClaimUsesThePartialIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.seedAttempts("done_", 100_000, []attempts.Status{attempts.Succeeded, attempts.Failed}, time.Hour)
	b.seedAttempts("due_", 100, []attempts.Status{attempts.Unknown, attempts.Pending, attempts.Created}, time.Hour)
	b.exec(`ANALYZE payment_attempts`)

	query := generatedQuery(t, "../db/attempts_schedule.sql.go", "attemptClaimDue")
	// $1 lease_ms, $2 min_age_ms, $3 max_rows, as the generated method binds them.
	args := []any{int64(5 * time.Minute / time.Millisecond), int64(2 * time.Minute / time.Millisecond), int32(100)}
	var plan json.RawMessage
	tx, err := b.pool.Begin(b.ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(b.ctx) }()
	require.NoError(t, tx.QueryRow(b.ctx, "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&plan))
	t.Logf("plan: %s", plan)
	require.Contains(t, string(plan), `"Index Name": "payment_attempts_unresolved_idx"`)
	require.NotContains(t, string(plan), `"Node Type": "Seq Scan"`)

	// And it is cheap: the real claim of all 100 (rolled back).
	start := time.Now()
	rows, err := tx.Query(b.ctx, query, args...)
	require.NoError(t, err)
	claimed := 0
	for rows.Next() {
		claimed++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 100, claimed)
	t.Logf("claimed %d of %d attempts in %s", claimed, 100_100, time.Since(start))
}

// generatedQuery returns the SQL text of const name in the sqlc output file,
// so the test explains exactly what the job runs.
func generatedQuery(t *testing.T, file, name string) string {
	t.Helper()
	for _, c := range testkit.GoStringConsts(t, file) {
		if c.Name == name {
			require.Contains(t, c.Value, "FOR UPDATE SKIP LOCKED")
			return c.Value
		}
	}
	require.Failf(t, "query not found", "const %s not in %s", name, file)
	return ""
}
