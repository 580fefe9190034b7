package payments_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/provider/stripe"
	"github.com/acme/paymentsvc/internal/providersim"
)

// stripeBundle is b with a service on the simulator's Stripe face, through
// the Stripe connector.
func stripeBundle(t *testing.T) (*bundle, *proctest.Sim, *payments.Service) {
	t.Helper()
	b := setup(t)
	sim := proctest.ServeSim(t, providersim.Config{API: providersim.APIStripe, APIKey: simAPIKey}, nil)
	p := provider.NewResilient(stripe.New("stripe", sim.URL(), simAPIKey, &http.Client{}), providerConfig, nil)
	svc, err := payments.NewRouted(b.pool, []payments.Provider{p}, timings, nil)
	require.NoError(t, err)
	return b, sim, svc
}

// A payment method Stripe does not know (400 invalid_request_error
// resource_missing, no PaymentIntent made) fails the payment at once on
// its first request: 402, failure_code resource_missing, no charge, one
// POST (replayed, the same key posts nothing more).
func TestStripeRejectionFailsAFirstRequest(t *testing.T) {
	t.Parallel()
	b, sim, svc := stripeBundle(t)
	in := b.input("k-bogus", "order-bogus")
	in.PaymentMethod = "pm_card_bogus"

	r, err := svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusPaymentRequired, r.Code, "%s", r.Body)
	var body struct {
		Status      string `json:"status"`
		FailureCode string `json:"failure_code"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &body))
	require.Equal(t, "FAILED", body.Status)
	require.Equal(t, "resource_missing", body.FailureCode)
	a := b.get(r.PaymentID)
	require.Equal(t, attempts.Failed, a.Status)
	require.Nil(t, a.ProviderChargeID, "no PaymentIntent was made")
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Failed}, b.history(r.PaymentID))
	require.Empty(t, sim.Charges(t))
	require.Equal(t, int64(1), sim.Stats(t).ChargeCalls)

	again, err := svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusPaymentRequired, again.Code)
	require.True(t, again.Replayed)
	require.Equal(t, int64(1), sim.Stats(t).ChargeCalls)
}

// A payment whose first request may have reached Stripe (503s until the
// budget ran out: UNKNOWN) is not failed by a rejection of its resumed
// request: an earlier try could have had another answer, so it stays
// UNKNOWN (202) for the reads to decide.
func TestStripeRejectionOnAResumedPaymentStaysUnknown(t *testing.T) {
	t.Parallel()
	b, sim, svc := stripeBundle(t)
	in := b.input("k-bogus-resume", "order-bogus-resume")
	in.PaymentMethod = "pm_card_bogus"

	sim.SetFaults(t, providersim.Faults{ErrorRate: 1, ErrorStatus: http.StatusServiceUnavailable})
	r, err := svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.Code, "%s", r.Body)
	require.Equal(t, attempts.Unknown, b.get(r.PaymentID).Status)
	first := sim.Stats(t).ChargeCalls
	require.Positive(t, first)

	sim.ClearFaults(t)
	r, err = svc.Create(b.ctx, in)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, r.Code, "%s", r.Body)
	require.Equal(t, attempts.Unknown, b.get(r.PaymentID).Status)
	require.Equal(t, first+1, sim.Stats(t).ChargeCalls, "the resume posted once and got the 400")
	require.Empty(t, sim.Charges(t))
	require.Equal(t, []attempts.Status{attempts.Created, attempts.Pending, attempts.Unknown}, b.history(r.PaymentID), "never FAILED")
}
