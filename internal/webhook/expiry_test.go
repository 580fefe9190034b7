package webhook

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// unknownForDays seeds an UNKNOWN payment whose key was made three days
// ago (its creation-based expiry long past) and returns it and its key's
// lock.
func (b *bundle) unknownForDays() (testdb.Seeded, string) {
	b.t.Helper()
	chargeID := testkit.RandomID("ch_")
	s := testdb.Attempt(b.t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: attempts.Unknown, ChargeID: chargeID})
	_, err := b.pool.Exec(context.Background(), `UPDATE idempotency_keys
		SET created_at = created_at - interval '3 days', expires_at = expires_at - interval '3 days' WHERE attempt_id = $1`, s.ID)
	require.NoError(b.t, err)
	return s, chargeID
}

// keyExpiresAtResolution reports whether attempt id's key expires
// idempotency.DefaultKeyTTL (the handler's KeyTTL in these tests) after the
// attempt's last change, which the resolving transaction made.
func (b *bundle) keyExpiresAtResolution(id string) bool {
	b.t.Helper()
	var ok bool
	require.NoError(b.t, b.pool.QueryRow(context.Background(), `
		SELECT k.expires_at = a.updated_at + $2 * interval '1 millisecond'
		FROM idempotency_keys AS k JOIN payment_attempts AS a ON a.id = k.attempt_id WHERE k.attempt_id = $1`,
		id, idempotency.DefaultKeyTTL.Milliseconds()).Scan(&ok))
	return ok
}

// A payment that stayed UNKNOWN for days and is resolved by a webhook keeps
// its key a whole IDEMPOTENCY_KEY_TTL from the resolution (§19), so gc does
// not delete it and a retry with it still finds its payment.
func TestResolvedPaymentKeepsItsKeyForTheTTL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, chargeID := b.unknownForDays()
	expectOK(t, b.deliver(newEvent(EventChargeSucceeded, s.Attempt, chargeID)))
	require.Equal(t, attempts.Succeeded, b.get(s.ID).Status)
	require.True(t, b.keyExpiresAtResolution(s.ID), "the key expires a TTL after the resolution")
	deleted, err := idempotency.DeleteExpired(context.Background(), b.pool, 100)
	require.NoError(t, err)
	require.Zero(t, deleted, "gc keeps the key")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM idempotency_keys WHERE attempt_id = $1`, s.ID))
}

// A webhook never waits for a key a request holds (it would take the key's
// row after the payment's, against the lock order): it resolves the
// payment and leaves the expiry to the holder, whose release (or answer)
// starts it then.
func TestWebhookLeavesAHeldKeyToItsHolder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s, chargeID := b.unknownForDays()
	ctx := context.Background()
	var before time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT expires_at FROM idempotency_keys WHERE attempt_id = $1`, s.ID).Scan(&before))
	err := db.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		held, err := idempotency.Hold(ctx, tx, s.Lock)
		require.NoError(t, err)
		require.True(t, held, "the test holds the key's row")
		expectOK(t, b.deliver(newEvent(EventChargeSucceeded, s.Attempt, chargeID)))
		var during time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT expires_at FROM idempotency_keys WHERE attempt_id = $1`, s.ID).Scan(&during))
		require.Equal(t, before, during, "the held key was passed over")
		_, err = idempotency.Release(ctx, tx, s.Lock)
		return err
	})
	require.NoError(t, err)
	require.Equal(t, attempts.Succeeded, b.get(s.ID).Status)
	var fresh bool
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT expires_at > now() + interval '47 hours' FROM idempotency_keys WHERE attempt_id = $1`, s.ID).Scan(&fresh))
	require.True(t, fresh, "the holder's release started the expiry")
}
