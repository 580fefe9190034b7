package sim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/provider"
	"github.com/acme/paymentsvc/internal/provider/sim"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/testkit"
)

// simProvider is a resilient client of a real simulator, and the
// simulator's URL (for its control API).
func simProvider(t *testing.T) (*provider.Resilient, string) {
	t.Helper()
	ps, err := providersim.New(providersim.Config{APIKey: "sk_hold"})
	require.NoError(t, err)
	srv := httptest.NewServer(ps.Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = ps.Close()
	})
	cfg := provider.Config{CallTimeout: 500 * time.Millisecond, RetryBudget: 300 * time.Millisecond, BreakerFailures: 100, BreakerCooldown: time.Second}
	return provider.NewResilient(sim.NewHTTPClient("sim", srv.URL, "sk_hold", &http.Client{}), cfg, nil), srv.URL
}

func control(t *testing.T, method, url string, body any) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(method, url, bytes.NewReader(b))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s %s", method, url)
}

func authorize(t *testing.T, p *provider.Resilient, key string) provider.Charge {
	t.Helper()
	r := p.CreateCharge(t.Context(), provider.ChargeRequest{
		Amount: 1000, Currency: "EUR", PaymentMethod: "pm_card_visa", Reference: "pay_" + key, IdempotencyKey: key, Manual: true,
	})
	require.Equal(t, provider.Succeeded, r.Outcome, "%v", r.Err)
	require.Equal(t, provider.ChargeAuthorized, r.Charge.Status)
	require.EqualValues(t, 1000, r.Charge.AmountCapturable)
	require.NotZero(t, r.Charge.CaptureBefore)
	require.False(t, r.Charge.MovedMoney())
	return *r.Charge
}

func TestCaptureAndItsRefusals(t *testing.T) {
	t.Parallel()
	p, _ := simProvider(t)
	ch := authorize(t, p, "k-auth")

	big := p.CaptureCharge(t.Context(), provider.CaptureRequest{ChargeID: ch.ID, Amount: 1001, Reference: "cap_1", IdempotencyKey: "k-cap"})
	require.Equal(t, provider.Declined, big.Outcome)
	require.Equal(t, provider.CodeAmountTooLarge, big.DeclineCode)

	r := p.CaptureCharge(t.Context(), provider.CaptureRequest{ChargeID: ch.ID, Amount: 700, Reference: "cap_1", IdempotencyKey: "k-cap"})
	require.Equal(t, provider.Succeeded, r.Outcome, "%v", r.Err)
	require.Equal(t, provider.ChargeSucceeded, r.Charge.Status)
	require.EqualValues(t, 700, r.Charge.CapturedAmount())
	require.Equal(t, "k-cap", r.Charge.CaptureKey)
	require.True(t, r.Charge.MovedMoney())

	again := p.CaptureCharge(t.Context(), provider.CaptureRequest{ChargeID: ch.ID, Amount: 700, Reference: "cap_1", IdempotencyKey: "k-cap"})
	require.Equal(t, provider.Succeeded, again.Outcome, "the same key replays the capture")

	other := p.CaptureCharge(t.Context(), provider.CaptureRequest{ChargeID: ch.ID, Amount: 100, Reference: "cap_2", IdempotencyKey: "k-cap-2"})
	require.Equal(t, provider.Declined, other.Outcome)
	require.Equal(t, provider.CodeChargeAlreadyCaptured, other.DeclineCode)
	void := p.VoidCharge(t.Context(), provider.VoidRequest{ChargeID: ch.ID, Reference: "void_1", IdempotencyKey: "k-void"})
	require.Equal(t, provider.Declined, void.Outcome)
	require.Equal(t, provider.CodeChargeAlreadyCaptured, void.DeclineCode)

	h, err := p.FindCapture(t.Context(), provider.Lookup{Key: "k-cap"})
	require.NoError(t, err)
	require.Equal(t, provider.Hold{Charge: ch.ID, Amount: 700, Reference: "cap_1", IdempotencyKey: "k-cap", Created: h.Created}, h)
	_, err = p.FindCapture(t.Context(), provider.Lookup{Key: "k-cap-2"})
	require.ErrorIs(t, err, provider.ErrNotFound, "a refused capture is not stored")
	_, err = p.FindVoid(t.Context(), provider.Lookup{Key: "k-void"})
	require.ErrorIs(t, err, provider.ErrNotFound)

	got, err := p.GetCharge(t.Context(), ch.ID)
	require.NoError(t, err)
	require.Equal(t, *r.Charge, got)
	_, err = p.GetCharge(t.Context(), "ch_nope")
	require.ErrorIs(t, err, provider.ErrNotFound)
}

func TestVoidThenExpiry(t *testing.T) {
	t.Parallel()
	p, url := simProvider(t)
	ch := authorize(t, p, "k-auth")
	r := p.VoidCharge(t.Context(), provider.VoidRequest{ChargeID: ch.ID, Reference: "void_1", Reason: "duplicate", IdempotencyKey: "k-void"})
	require.Equal(t, provider.Succeeded, r.Outcome, "%v", r.Err)
	require.Equal(t, provider.ChargeVoided, r.Charge.Status)
	h, err := p.FindVoid(t.Context(), provider.Lookup{Key: "k-void"})
	require.NoError(t, err)
	require.Equal(t, ch.ID, h.Charge)
	capture := p.CaptureCharge(t.Context(), provider.CaptureRequest{ChargeID: ch.ID, IdempotencyKey: "k-cap"})
	require.Equal(t, provider.Declined, capture.Outcome)
	require.Equal(t, provider.CodeChargeNotCapturable, capture.DeclineCode)

	held := authorize(t, p, "k-auth-2")
	control(t, http.MethodPost, url+"/_sim/charges/"+held.ID+"/expire", nil)
	expired := p.CaptureCharge(t.Context(), provider.CaptureRequest{ChargeID: held.ID, IdempotencyKey: "k-cap-2"})
	require.Equal(t, provider.Declined, expired.Outcome)
	require.Equal(t, provider.CodeAuthorizationExpired, expired.DeclineCode)
	got, err := p.GetCharge(t.Context(), held.ID)
	require.NoError(t, err)
	require.Equal(t, provider.ChargeExpired, got.Status)
}

// TestCaptureOutcomesAreNeverGuessed: a 5xx after the budget and a lost
// answer are Unknown; a provider that cannot be reached is NotSent.
func TestCaptureOutcomesAreNeverGuessed(t *testing.T) {
	t.Parallel()
	p, url := simProvider(t)
	ch := authorize(t, p, "k-auth")
	control(t, http.MethodPut, url+"/_sim/faults", providersim.Faults{ErrorRate: 1, ErrorStatus: 503, Captures: true})
	r := p.CaptureCharge(t.Context(), provider.CaptureRequest{ChargeID: ch.ID, IdempotencyKey: "k-cap"})
	require.Equal(t, provider.Unknown, r.Outcome)
	require.Greater(t, r.Tries, 1, "retried within the budget")

	control(t, http.MethodPut, url+"/_sim/faults", providersim.Faults{DropAfterCommit: true, Captures: true})
	r = p.VoidCharge(t.Context(), provider.VoidRequest{ChargeID: ch.ID, IdempotencyKey: "k-void"})
	require.Equal(t, provider.Unknown, r.Outcome, "the void happened, its answer was lost")
	_, err := p.FindVoid(t.Context(), provider.Lookup{Key: "k-void"})
	require.NoError(t, err, "looking it up finds it")

	dead := provider.NewResilient(sim.NewHTTPClient("sim", "http://"+testkit.ReservedAddr(t), "sk_hold", &http.Client{}),
		provider.Config{CallTimeout: 300 * time.Millisecond, RetryBudget: 300 * time.Millisecond}, nil)
	r = dead.CaptureCharge(t.Context(), provider.CaptureRequest{ChargeID: ch.ID, IdempotencyKey: "k-cap-3"})
	require.Equal(t, provider.NotSent, r.Outcome)
}
