package idempotency_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/testdb"
)

// keyExpiryUp is the Up part of the migration that moved keys' expiry to
// their final answer.
func keyExpiryUp(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../db/migrations/00008_key_expiry.sql")
	require.NoError(t, err)
	up, _, ok := strings.Cut(string(raw), "-- +goose Down")
	require.True(t, ok)
	return strings.TrimPrefix(up, "-- +goose Up")
}

// 00008_key_expiry gives the keys written under the old rule (expiry from
// creation) the expiry of the new one, with the TTL they were made with: an
// answered key from its answer, an unanswered key of a final payment from
// the payment's resolution; a key of an unresolved payment and a key
// answered at once keep theirs.
func TestKeyExpiryMigration(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	ctx := context.Background()
	const ttl = 48 * time.Hour
	seed := func(status attempts.Status, state testdb.KeyState) string {
		return testdb.Attempt(t, d.Pool, testdb.AttemptOpts{Status: status, KeyState: state, ChargeID: "ch_" + string(status)}).ID
	}
	answeredLate := seed(attempts.Succeeded, testdb.KeyCompleted)
	resolvedByWebhook := seed(attempts.Failed, testdb.KeyReleased)
	unresolved := seed(attempts.Unknown, testdb.KeyReleased)
	answeredAtOnce := seed(attempts.Succeeded, testdb.KeyCompleted)
	// As the old rule left them: made three days ago, expiring 48h after
	// that; the late answer and the resolution came two days after.
	_, err := d.Pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = now() - interval '3 days',
		expires_at = now() - interval '3 days' + $2 * interval '1 millisecond',
		updated_at = CASE WHEN attempt_id = $3 THEN now() - interval '3 days' ELSE now() - interval '1 day' END
		WHERE attempt_id = ANY($1)`, []string{answeredLate, resolvedByWebhook, unresolved, answeredAtOnce}, ttl.Milliseconds(), answeredAtOnce)
	require.NoError(t, err)
	_, err = d.Pool.Exec(ctx, `UPDATE payment_attempts SET updated_at = now() - interval '1 day' WHERE id = $1`, resolvedByWebhook)
	require.NoError(t, err)
	expiry := func(id string) time.Time {
		var at time.Time
		require.NoError(t, d.Pool.QueryRow(ctx, `SELECT expires_at FROM idempotency_keys WHERE attempt_id = $1`, id).Scan(&at))
		return at
	}
	unresolvedBefore, atOnceBefore := expiry(unresolved), expiry(answeredAtOnce)

	_, err = d.Pool.Exec(ctx, keyExpiryUp(t))
	require.NoError(t, err)
	var answeredOK, resolvedOK bool
	require.NoError(t, d.Pool.QueryRow(ctx, `
		SELECT bool_and(k.expires_at = k.updated_at + $3 * interval '1 millisecond') FILTER (WHERE k.attempt_id = $1),
		       bool_and(k.expires_at = a.updated_at + $3 * interval '1 millisecond') FILTER (WHERE k.attempt_id = $2)
		FROM idempotency_keys AS k JOIN payment_attempts AS a ON a.id = k.attempt_id`,
		answeredLate, resolvedByWebhook, ttl.Milliseconds()).Scan(&answeredOK, &resolvedOK))
	require.True(t, answeredOK, "an answered key expires a TTL after its answer")
	require.True(t, resolvedOK, "a key of a payment resolved without it expires a TTL after the resolution")
	require.Equal(t, unresolvedBefore, expiry(unresolved), "a key of an unresolved payment keeps its expiry")
	require.Equal(t, atOnceBefore, expiry(answeredAtOnce), "a key answered at once keeps its expiry")
	require.True(t, expiry(answeredLate).After(time.Now().Add(ttl-25*time.Hour)), "no longer expired")
}
