package payments_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/providersim"
)

// keyExpiresAtAnswer reports whether the key of attempt id expires exactly
// KeyTTL after the moment the attempt's last change was committed (the
// transaction that stores the key's answer sets both with its now()), and
// whether that is later than KeyTTL after the key's creation.
func (b *bundle) keyExpiresAtAnswer(id string) (atAnswer, afterCreation bool) {
	b.t.Helper()
	require.NoError(b.t, b.pool.QueryRow(b.ctx, `
		SELECT k.expires_at = a.updated_at + $2 * interval '1 millisecond',
		       k.expires_at > k.created_at + $2 * interval '1 millisecond'
		FROM idempotency_keys AS k JOIN payment_attempts AS a ON a.id = k.attempt_id
		WHERE k.attempt_id = $1`, id, timings.KeyTTL.Milliseconds()).Scan(&atAnswer, &afterCreation))
	return atAnswer, afterCreation
}

// A key expires IDEMPOTENCY_KEY_TTL after its final answer is stored, not
// after its creation (§19): at once for an answer given at once (the fast
// path, here after a slow provider), and at resolution for a payment that
// was UNKNOWN, however long ago the key was made; gc then keeps it, and the
// same key replays.
func TestKeyExpiresFromItsFinalAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t)

	b.sim.SetFaults(b.t, providersim.Faults{LatencyMS: 200})
	r, err := b.svc.Create(b.ctx, b.input("exp-fast", "o-exp-fast"))
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, r.Code)
	atAnswer, afterCreation := b.keyExpiresAtAnswer(r.PaymentID)
	require.True(t, atAnswer, "expires KeyTTL after the answer")
	require.True(t, afterCreation, "the answer came after the key was made")

	b.sim.SetFaults(b.t, providersim.Faults{ErrorRate: 1, ErrorStatus: http.StatusServiceUnavailable})
	in := b.input("exp-unknown", "o-exp-unknown")
	r, err = b.svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.Code, "UNKNOWN")
	// UNKNOWN for days: made three days ago, its old expiry long past.
	_, err = b.pool.Exec(b.ctx, `UPDATE idempotency_keys SET created_at = created_at - interval '3 days',
		expires_at = created_at - interval '3 days' + $2 * interval '1 millisecond' WHERE attempt_id = $1`,
		r.PaymentID, timings.KeyTTL.Milliseconds())
	require.NoError(t, err)
	b.sim.ClearFaults(b.t)
	resolved, err := b.svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, resolved.Code, "the retry resolves it")
	require.Equal(t, attempts.Succeeded, b.get(r.PaymentID).Status)
	atAnswer, afterCreation = b.keyExpiresAtAnswer(r.PaymentID)
	require.True(t, atAnswer, "expires KeyTTL after the resolution")
	require.True(t, afterCreation)

	deleted, err := idempotency.DeleteExpired(b.ctx, b.pool, 100)
	require.NoError(t, err)
	require.Zero(t, deleted, "gc keeps both keys")
	replay, err := b.svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.True(t, replay.Replayed, "the key replays")
	require.Equal(t, http.StatusCreated, replay.Code)
	require.Equal(t, r.PaymentID, replay.PaymentID)
}
