package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/idempotency"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// heldHooks is a transport for the simulator's webhooks that holds every
// delivery until release is closed.
type heldHooks struct{ release chan struct{} }

func (h heldHooks) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case <-h.release:
	case <-r.Context().Done():
		return nil, r.Context().Err()
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A refund whose answer was lost (UNKNOWN) for longer than its key's TTL
// since the key was made, and then resolved by the provider's webhook,
// keeps its key a whole IDEMPOTENCY_KEY_TTL from the resolution (§19):
// reconciler gc leaves it, and the same key answers the refund.
func TestKeyOfARefundResolvedByWebhookOutlivesItsCreation(t *testing.T) {
	t.Parallel()
	hooks := heldHooks{release: make(chan struct{})}
	s := setupOps(t, opsOptions{webhooks: true, hookTransport: hooks})
	pay := s.client.MustPay(t, "exp-pay", apiclient.Visa("o-exp", 1000))
	require.Equal(t, http.StatusCreated, pay.Status, "%s", pay)

	s.sim.SetFaults(t, providersim.Faults{DropAfterCommit: true, Refunds: true})
	lost := s.client.MustDo(t, http.MethodPost, "/v1/payments/"+pay.Str("id")+"/refunds", []byte(`{"amount":300}`),
		map[string]string{"Idempotency-Key": "exp-refund", "Content-Type": "application/json"})
	require.Equal(t, http.StatusAccepted, lost.Status, "the answer was lost: %s", lost)
	s.sim.ClearFaults(t)
	// Made three days ago: by its creation it would have expired a day ago.
	ctx := context.Background()
	_, err := s.db.Pool.Exec(ctx, `UPDATE idempotency_keys SET created_at = created_at - interval '3 days',
		expires_at = expires_at - interval '3 days' WHERE refund_id = $1`, lost.Str("id"))
	require.NoError(t, err)

	close(hooks.release)
	testkit.Eventually(t, 30*time.Second, "refund.succeeded resolves the refund", func() bool {
		r, err := s.client.Get("/v1/refunds/" + lost.Str("id"))
		return err == nil && r.Str("status") == "SUCCEEDED"
	})
	// The expiry starts in the transaction that resolved the refund (the
	// refund.succeeded webhook) or, when the charge.succeeded webhook's
	// refund sync got there first, in the one that stored the key's final
	// answer a moment later: either way a whole TTL from the resolution.
	var ms int64
	require.NoError(t, s.db.Pool.QueryRow(ctx, `SELECT (EXTRACT(EPOCH FROM k.expires_at - r.updated_at) * 1000)::bigint
		FROM idempotency_keys AS k JOIN refunds AS r ON r.id = k.refund_id WHERE k.refund_id = $1`,
		lost.Str("id")).Scan(&ms))
	sinceResolution := time.Duration(ms) * time.Millisecond
	require.GreaterOrEqual(t, sinceResolution, idempotency.DefaultKeyTTL, "the key expires IDEMPOTENCY_KEY_TTL after the resolution")
	require.Less(t, sinceResolution, idempotency.DefaultKeyTTL+time.Minute, "counted from the resolution, not later")

	stdout, stderr, code, err := proctest.Run(ctx, proctest.Build(t).Reconciler, []string{"gc"}, []string{"DATABASE_URL=" + s.db.URL})
	require.NoError(t, err)
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, `{"deleted":0,"webhook_events_deleted":0,"outbox_deleted":0}`, stdout)
	again := s.client.MustDo(t, http.MethodPost, "/v1/payments/"+pay.Str("id")+"/refunds", []byte(`{"amount":300}`),
		map[string]string{"Idempotency-Key": "exp-refund", "Content-Type": "application/json"})
	require.Equal(t, http.StatusCreated, again.Status, "%s", again)
	require.Equal(t, lost.Str("id"), again.Str("id"), "the same refund, not a new one")
	require.Len(t, simRefunds(t, s.sim), 1, "refunded once")
}
