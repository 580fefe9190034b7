package payments_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
)

// quiet is attempts.QuietFor, failing the test on error.
func (b *bundle) quiet(id string, d time.Duration) bool {
	b.t.Helper()
	q, err := attempts.QuietFor(b.ctx, b.pool, id, d)
	require.NoError(b.t, err)
	return q
}

// Touch records a provider call about to be made for an unresolved attempt:
// the attempt is no longer quiet, so the reconciler's "not found at the
// provider" window starts over. A final attempt is left as it is.
func TestTouchResetsTheQuietWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	window := b.svc.Config().NoRecordAfter()
	unknown := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: attempts.Unknown, Age: 10 * time.Minute})
	final := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: attempts.Succeeded, Age: 10 * time.Minute})
	require.True(t, b.quiet(unknown.ID, window))
	require.True(t, b.quiet(final.ID, window))

	for _, id := range []string{unknown.ID, final.ID} {
		require.NoError(t, attempts.Touch(b.ctx, b.pool, id))
	}
	require.False(t, b.quiet(unknown.ID, window), "touched: a call of ours may still land")
	require.True(t, b.quiet(final.ID, window), "a final attempt is not touched")
	require.Equal(t, attempts.Unknown, b.get(unknown.ID).Status, "Touch changes no status")
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Unknown}, b.history(unknown.ID), "nor audits anything")
}

// Sync fails an UNKNOWN attempt the provider has no charge for only once
// the attempt has been quiet longer than a call of ours can take to land:
// of two such attempts, long quiet, the one just touched (a retry is about
// to call the provider) stays UNKNOWN, its key released for that retry.
func TestSyncNotFoundWaitsOutATouch(t *testing.T) {
	t.Parallel()
	// A window of 5 minutes: no busy machine takes that long between the
	// Touch and the Sync.
	cfg := timings
	cfg.LockTTL = 5 * time.Minute
	b := setupWith(t, cfg, providerConfig)
	seed := testdb.AttemptOpts{TenantID: b.tenantID, Status: attempts.Unknown, Age: 10 * time.Minute}
	untouched := testdb.Attempt(t, b.pool, seed)
	touched := testdb.Attempt(t, b.pool, seed)
	require.NoError(t, attempts.Touch(b.ctx, b.pool, touched.ID))
	opt := payments.SyncOptions{Source: attempts.SourceReconciler}

	a, outcome, err := b.svc.Sync(b.ctx, untouched.ID, opt)
	require.NoError(t, err)
	require.Equal(t, payments.Resolved, outcome)
	require.Equal(t, attempts.Failed, a.Status)
	require.Equal(t, attempts.FailureProviderNoRecord, *a.FailureCode)

	a, outcome, err = b.svc.Sync(b.ctx, touched.ID, opt)
	require.NoError(t, err)
	require.Equal(t, payments.StillUnknown, outcome)
	require.Equal(t, attempts.Unknown, a.Status)
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Unknown}, b.history(touched.ID))
	k := b.key(touched.IdempotencyKey)
	require.False(t, k.locked, "the key is released for the retry")
	require.Nil(t, k.code)

	require.Equal(t, providersim.Stats{}, b.sim.Stats(t), "Sync only looks charges up")
}
