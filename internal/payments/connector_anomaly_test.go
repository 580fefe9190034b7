package payments_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/provider/stripe"
)

// A connector's flag on an unknown outcome is recorded as an anomaly: a
// Stripe 400 idempotency_error (our key seen with other parameters) makes
// the payment UNKNOWN, never FAILED, with one idempotency_error anomaly,
// after exactly one try.
func TestConnectorAnomalyIsRecordedOnUnknown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"type":"idempotency_error","message":"Keys for idempotent requests can only be used with the same parameters they were first used with."}}`))
	}))
	t.Cleanup(srv.Close)
	p := provider.NewResilient(stripe.New("stripe", srv.URL, "sk_test_x", &http.Client{}), providerConfig, nil)
	svc, err := payments.NewRouted(b.pool, []payments.Provider{p}, timings, nil)
	require.NoError(t, err)

	r, err := svc.Create(b.ctx, b.input("k-idem", "order-idem"))
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.Code, "%s", r.Body)
	require.Equal(t, attempts.Unknown, b.get(r.PaymentID).Status)
	require.Equal(t, int32(1), posts.Load(), "never retried")
	require.Equal(t, 1, b.count(`SELECT count(*) FROM anomalies WHERE kind = 'idempotency_error' AND attempt_id = $1`, r.PaymentID))
}
