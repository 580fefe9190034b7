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
	return b.ids(`SELECT attempt_id FROM idempotency_keys ORDER BY attempt_id`)
}

func TestGCDeletesOnlyExpiredKeysOfFinalPayments(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 10,000 keys; skipped with -short")
	}
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
	rep, err := r.GC(b.ctx)
	took := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, reconcile.GCReport{Deleted: 10_000}, rep)
	t.Logf("gc deleted %d keys in %s", rep.Deleted, took)
	require.Equal(t, []string{
		"fresh_1", "fresh_2", "fresh_3", "fresh_4",
		"unresolved_1", "unresolved_2", "unresolved_3", "unresolved_4", "unresolved_5", "unresolved_6",
	}, b.keyIDs())

	rep, err = r.GC(b.ctx)
	require.NoError(t, err)
	require.Zero(t, rep.Deleted)
}

// seedWebhookEvents inserts n processed events prefix||i received age ago.
func (b *bundle) seedWebhookEvents(prefix string, n int, age time.Duration) {
	b.t.Helper()
	b.exec(`
		INSERT INTO webhook_events (provider, event_id, type, charge_id, outcome, payload, received_at)
		SELECT 'sim', $1 || i, 'charge.succeeded', 'ch_' || $1 || i, 'applied', '{}', now() - $3::bigint * interval '1 millisecond'
		FROM generate_series(1, $2::int) AS i`, prefix, n, age.Milliseconds())
}

// seedOutbox inserts one outbox row prefix||attempt id for each attempt,
// published age ago, or never when age is nil (then created 60 days ago).
func (b *bundle) seedOutbox(prefix string, attemptIDs []string, age *time.Duration) {
	b.t.Helper()
	var ms *int64
	if age != nil {
		v := age.Milliseconds()
		ms = &v
	}
	b.exec(`
		INSERT INTO outbox (id, type, subject, subject_id, payment_id, payload, created_at, published_at)
		SELECT $1 || a, 'PaymentSucceeded', 'payments.succeeded', a, a, '{}', now() - interval '60 days', now() - $3::bigint * interval '1 millisecond'
		FROM unnest($2::text[]) AS a`, prefix, attemptIDs, ms)
}

func (b *bundle) ids(query string) []string {
	b.t.Helper()
	return testdb.Strings[string](b.ctx, b.t, b.pool, query)
}

// GC deletes webhook events received, and outbox rows published, longer ago
// than their retention, by the database clock, in batches; it never deletes
// an unpublished outbox row, however old. A zero retention keeps nothing.
func TestGCDeletesOldWebhookEventsAndPublishedOutboxRows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const ttl, retention = 720 * time.Hour, 168 * time.Hour
	b.seedWebhookEvents("evt_old_", 5, ttl+time.Hour)
	b.seedWebhookEvents("evt_new_", 3, ttl-time.Hour)
	b.seedAttempts("ob_", 10, []attempts.Status{attempts.Succeeded}, time.Hour) // keys not expired
	old, recent, now := retention+time.Hour, retention-time.Hour, time.Duration(0)
	b.seedOutbox("old_", []string{"ob_1", "ob_2"}, &old)
	b.seedOutbox("recent_", []string{"ob_3", "ob_4"}, &recent)
	b.seedOutbox("just_published_", []string{"ob_5"}, &now)
	b.seedOutbox("unpublished_", []string{"ob_6", "ob_7", "ob_8"}, nil) // however old

	r := b.reconciler(reconcile.Config{GCBatchSize: 2, WebhookEventTTL: ttl, OutboxRetention: retention})
	rep, err := r.GC(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.GCReport{WebhookEventsDeleted: 5, OutboxDeleted: 2}, rep)
	require.Equal(t, []string{"evt_new_1", "evt_new_2", "evt_new_3"}, b.ids(`SELECT event_id FROM webhook_events ORDER BY event_id`))
	require.Equal(t, []string{"just_published_ob_5", "recent_ob_3", "recent_ob_4", "unpublished_ob_6", "unpublished_ob_7", "unpublished_ob_8"},
		b.ids(`SELECT id FROM outbox ORDER BY id`))
	require.Len(t, b.keyIDs(), 10, "no key expired")

	rep, err = r.GC(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.GCReport{}, rep, "nothing more is old enough")

	// Zero retention keeps nothing processed, and still every unpublished row.
	rep, err = b.reconciler(reconcile.Config{GCBatchSize: 2}).GC(b.ctx)
	require.NoError(t, err)
	require.Equal(t, reconcile.GCReport{WebhookEventsDeleted: 3, OutboxDeleted: 3}, rep)
	require.Empty(t, b.ids(`SELECT event_id FROM webhook_events`))
	require.Equal(t, []string{"unpublished_ob_6", "unpublished_ob_7", "unpublished_ob_8"}, b.ids(`SELECT id FROM outbox ORDER BY id`))
}

// With 100,000 final attempts and 100 due ones, the claim reads the partial
// index of unresolved attempts instead of the table.
func TestClaimUsesThePartialIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("seeds 100,000 attempts; skipped with -short")
	}
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
