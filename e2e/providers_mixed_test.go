package e2e

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// TestFailoverBetweenStripeAndSim: a Stripe provider first (the
// simulator's Stripe face, PROVIDER_TYPE_STRIPE=stripe) and a simulator
// provider second, whatever E2E_PROVIDER_TYPE says. With Stripe down
// (nothing sent) a payment fails over and is charged once at the
// simulator; with Stripe answering 503 (it may have charged) a payment is
// pinned to Stripe, never charged at the simulator, and its retry with
// the same key pays once at Stripe.
func TestFailoverBetweenStripeAndSim(t *testing.T) {
	t.Parallel()
	db := testdb.New(t)
	start := func(name, api string) *proctest.Sim {
		return proctest.StartSim(t, proctest.SimOptions{API: api, Env: []string{
			"SIM_ADDR=" + testkit.ReservedAddr(t),
			"SIM_STATE_FILE=" + filepath.Join(t.TempDir(), name+".json"),
		}})
	}
	st, sim := start("stripe", proctest.ProviderTypeStripe), start("sim", proctest.ProviderTypeSim)
	tenant := proctest.CreateTenant(t, db.URL, "shop-mixed")
	env := shortTimings(shortLockTTL, "PROVIDERS=stripe="+st.URL()+",sim_b="+sim.URL(),
		"PROVIDER_TYPE_STRIPE=stripe", "PROVIDER_TYPE_SIM_B=sim", "PROVIDER_BREAKER_FAILURES=100")
	p := proctest.StartPod(t, proctest.PodOptions{Name: "pod", DatabaseURL: db.URL, ProviderURL: st.URL(), Env: env})
	c := proctest.NewClient(p.URL(), tenant.APIKey)

	ok := c.MustPay(t, "mx-0", apiclient.Visa("o-mx-0", 500))
	require.Equal(t, 201, ok.Status, "%s", ok)
	require.Equal(t, "stripe", ok.Str("provider"))
	require.Regexp(t, `^pi_`, ok.Str("provider_charge_id"), "a PaymentIntent")

	st.Kill()
	r := c.MustPay(t, "mx-1", apiclient.Visa("o-mx-1", 500))
	require.Equal(t, 201, r.Status, "%s", r)
	require.Equal(t, "sim_b", r.Str("provider"), "Stripe was down: nothing sent, so failed over")
	failedOver := r.Str("id")
	require.Equal(t, []lifecycle.Status{lifecycle.Created, lifecycle.Pending, lifecycle.Created, lifecycle.Pending, lifecycle.Succeeded},
		trailOf(t, db, failedOver), "PENDING at Stripe, not sent, PENDING at the simulator")
	require.Equal(t, 1, sim.SucceededChargesFor(t, failedOver))

	st.Restart()
	st.SetFaults(t, providersim.Faults{ErrorRate: 1, ErrorStatus: 503})
	stuck := c.MustPay(t, "mx-2", apiclient.Visa("o-mx-2", 500))
	require.Equal(t, 202, stuck.Status, "%s", stuck)
	require.Equal(t, "stripe", stuck.Str("provider"), "a 503 may have charged: pinned to Stripe")
	require.Equal(t, 0, sim.SucceededChargesFor(t, stuck.Str("id")), "never charged at the simulator")

	st.ClearFaults(t)
	again := c.MustPay(t, "mx-2", apiclient.Visa("o-mx-2", 500))
	require.Equal(t, 201, again.Status, "%s", again)
	require.Equal(t, stuck.Str("id"), again.Str("id"))
	require.Equal(t, "stripe", again.Str("provider"))
	require.Equal(t, 1, st.SucceededChargesFor(t, stuck.Str("id")), "charged once, at Stripe")
	require.Equal(t, 0, sim.SucceededChargesFor(t, stuck.Str("id")))
	require.Equal(t, 0, st.SucceededChargesFor(t, failedOver), "the failed-over payment was never charged at Stripe")
}
