package e2e

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/testdb"
)

// On a Stripe provider (the simulator's Stripe face, whatever
// E2E_PROVIDER_TYPE says), a payment method Stripe does not know is
// refused with a 400 invalid_request_error resource_missing and no
// PaymentIntent: the payment is FAILED at once, 402 with failure_code
// resource_missing, one refused POST, no charge; the same key replays it.
func TestStripeUnknownPaymentMethodFailsAtOnce(t *testing.T) {
	t.Parallel()
	d := testdb.New(t)
	sim := proctest.StartSim(t, proctest.SimOptions{API: proctest.ProviderTypeStripe})
	pod := proctest.StartPod(t, proctest.PodOptions{Name: "pod", DatabaseURL: d.URL, ProviderURL: sim.URL(), ProviderType: proctest.ProviderTypeStripe})
	tn := proctest.CreateTenant(t, d.URL, "shop")
	c := proctest.NewClient(pod.URL(), tn.APIKey)

	body := apiclient.Payment{OrderID: "o-bogus", Amount: 500, Currency: "USD", PaymentMethod: "pm_card_bogus"}
	r := c.MustPay(t, "k-bogus", body)
	require.Equal(t, http.StatusPaymentRequired, r.Status, "%s", r)
	require.Equal(t, "FAILED", r.Str("status"))
	require.Equal(t, "resource_missing", r.Str("failure_code"))
	require.Empty(t, r.Str("provider_charge_id"))
	require.Empty(t, sim.Charges(t))
	require.Equal(t, int64(1), sim.Stats(t).ChargeCalls)

	again := c.MustPay(t, "k-bogus", body)
	require.Equal(t, http.StatusPaymentRequired, again.Status)
	require.True(t, again.Replayed())
	require.Equal(t, int64(1), sim.Stats(t).ChargeCalls)

	ok := c.MustPay(t, "k-visa", apiclient.Visa("o-visa", 500))
	require.Equal(t, http.StatusCreated, ok.Status, "%s", ok)
	require.Len(t, sim.Charges(t), 1)
}
