package api_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/idempotency"
)

// With the pod's replay cache on, a retry of the same bytes is answered from
// it (the third time before its body is even decoded): 201, Idempotent-
// Replayed, JSON, the stored answer byte for byte; the same key with another
// body is still 422, and the payment was charged once.
func TestReplayOfTheSameBytesOverHTTP(t *testing.T) {
	t.Parallel()
	b := setupWith(t, setupOptions{replayCache: idempotency.NewReplayCache(idempotency.DefaultReplayCacheBytes)})
	body := `{"order_id":"o-bytes","amount":500,"currency":"USD","payment_method":"pm_card_visa"}`
	first := b.pay(b.a, "k-bytes", body)
	require.Equal(t, http.StatusCreated, first.Status, "%s", first.Raw)
	require.False(t, first.Replayed())
	for i := range 3 { // from the database, from the cache by fingerprint, from the cache by bytes
		again := b.pay(b.a, "k-bytes", body)
		require.Equal(t, http.StatusCreated, again.Status, "replay %d", i)
		require.True(t, again.Replayed(), "replay %d", i)
		require.Equal(t, "application/json", again.Header.Get("Content-Type"), "replay %d", i)
		require.Equal(t, string(first.Raw), string(again.Raw), "replay %d: the stored answer", i)
	}
	other := b.pay(b.a, "k-bytes", `{"order_id":"o-bytes","amount":501,"currency":"USD","payment_method":"pm_card_visa"}`)
	require.NoError(t, other.CheckProblem(http.StatusUnprocessableEntity, "idempotency_key_reused"))
	require.Len(t, b.sim.Charges(t), 1, "charged once")
}
