package testdb_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/testdb"
)

// keyState reads what a seeded key holds.
func keyState(t *testing.T, d *testdb.DB, attemptID string) (locked bool, code *int32) {
	t.Helper()
	require.NoError(t, d.Pool.QueryRow(t.Context(),
		`SELECT locked_until IS NOT NULL AND locked_until > now(), response_code FROM idempotency_keys WHERE attempt_id = $1`,
		attemptID).Scan(&locked, &code))
	return locked, code
}

func count(t *testing.T, d *testdb.DB, query string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, d.Pool.QueryRow(t.Context(), query, args...).Scan(&n))
	return n
}

// Every status is seeded along a legal, audited path, with its key in the
// state the service leaves it, and SUCCEEDED with its one outbox row.
func TestAttemptInEveryStatus(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	tenant := testdb.Tenant(t, d.Pool, testdb.TenantOpts{})
	for _, st := range []attempts.Status{attempts.Created, attempts.Pending, attempts.Unknown, attempts.Succeeded, attempts.Failed} {
		a := testdb.Attempt(t, d.Pool, testdb.AttemptOpts{TenantID: tenant.ID, Status: st, ChargeID: "ch_" + string(st)})
		require.Equal(t, st, a.Status)
		require.Equal(t, tenant.ID, a.TenantID)
		hist, err := attempts.History(t.Context(), d.Pool, a.ID)
		require.NoError(t, err)
		require.True(t, attempts.LegalPath(hist), "%s: %v", st, hist)
		require.Equal(t, st, hist[len(hist)-1])
		locked, code := keyState(t, d, a.ID)
		require.False(t, locked, st)
		if st.Final() {
			require.NotNil(t, a.ProviderChargeID, st)
			require.NotNil(t, code, "a final attempt's key holds the service's response")
		} else {
			require.Nil(t, code, st)
		}
		want := 0
		if st.Final() { // PaymentSucceeded or PaymentFailed
			want = 1
		}
		require.Equal(t, want, count(t, d, `SELECT count(*) FROM outbox WHERE payment_id = $1`, a.ID), st)
	}
}

func TestAttemptKeyStatesAndBookkeeping(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	locked := testdb.Key(t, d.Pool, testdb.KeyOpts{})
	isLocked, code := keyState(t, d, locked.ID)
	require.True(t, isLocked)
	require.Nil(t, code)
	require.Equal(t, attempts.Created, locked.Status)

	completed := testdb.Key(t, d.Pool, testdb.KeyOpts{State: testdb.KeyCompleted, ResponseCode: 202})
	isLocked, code = keyState(t, d, completed.ID)
	require.False(t, isLocked)
	require.EqualValues(t, 202, *code)

	next := time.Hour
	aged := testdb.Attempt(t, d.Pool, testdb.AttemptOpts{Status: attempts.Unknown, Age: 10 * time.Minute, CheckCount: 3, NeedsReview: true, NextCheck: &next})
	require.Equal(t, 3, aged.CheckCount)
	require.True(t, aged.NeedsReview)
	require.NotNil(t, aged.NextCheckAt)
	quiet, err := attempts.QuietFor(t.Context(), d.Pool, aged.ID, 9*time.Minute)
	require.NoError(t, err)
	require.True(t, quiet)
}

func TestAttemptsInBulk(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	tenant := testdb.Tenant(t, d.Pool, testdb.TenantOpts{})
	ids := testdb.Attempts(t, d.Pool, testdb.AttemptsOpts{
		TenantID: tenant.ID, Prefix: "bulk_", N: 9, Outbox: true,
		Statuses: []attempts.Status{attempts.Created, attempts.Unknown, attempts.Succeeded},
	})
	require.Len(t, ids, 9)
	for i, id := range ids {
		a, err := attempts.Get(t.Context(), d.Pool, id)
		require.NoError(t, err)
		want := []attempts.Status{attempts.Created, attempts.Unknown, attempts.Succeeded}[i%3]
		require.Equal(t, want, a.Status, id)
		hist, err := attempts.History(t.Context(), d.Pool, id)
		require.NoError(t, err)
		require.True(t, attempts.LegalPath(hist), "%s: %v", id, hist)
		require.Equal(t, want, hist[len(hist)-1])
	}
	require.Equal(t, 3, count(t, d, `SELECT count(*) FROM outbox`))
	require.Equal(t, 3, count(t, d, `SELECT count(*) FROM idempotency_keys WHERE response_code = 201`))
	require.Equal(t, 9, count(t, d, `SELECT count(*) FROM idempotency_keys WHERE locked_until IS NULL`))
}

func TestOtherTables(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	a := testdb.Attempt(t, d.Pool, testdb.AttemptOpts{Status: attempts.Unknown})
	ev := testdb.Outbox(t, d.Pool, testdb.OutboxOpts{PaymentID: a.ID, Type: "PaymentFailed"})
	require.Equal(t, 1, count(t, d, `SELECT count(*) FROM outbox WHERE id = $1 AND payment_id = $2 AND type = 'PaymentFailed'`, ev, a.ID))
	hook := testdb.WebhookEvent(t, d.Pool, testdb.WebhookEventOpts{AttemptID: a.ID, Outcome: "noop"})
	require.Equal(t, 1, count(t, d, `SELECT count(*) FROM webhook_events WHERE event_id = $1 AND attempt_id = $2 AND outcome = 'noop'`, hook, a.ID))
	for range 2 {
		testdb.Anomaly(t, d.Pool, attempts.Anomaly{Kind: "conflicting_report", AttemptID: a.ID, DedupeKey: "once"})
	}
	require.Equal(t, 1, count(t, d, `SELECT count(*) FROM anomalies WHERE attempt_id = $1 AND source = 'webhook'`, a.ID))
}
