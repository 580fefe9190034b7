package console_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testkit"
)

// authorized makes a manual payment the provider authorized and returns its id.
func (s *stack) authorized(t *testing.T, orderID string, amount int64) string {
	t.Helper()
	r := s.pay(t, orderID, amount, map[string]any{"capture_method": "manual"})
	require.Equal(t, http.StatusCreated, r.Status, r.String())
	require.Equal(t, "AUTHORIZED", r.Str("status"))
	return r.Str("id")
}

// TestPartialCaptureSubmittedTwice: an operator captures part of an
// authorization from the page, the form sent twice at once and then once
// more by its button: one capture, here and at the provider; the payment
// is SUCCEEDED with what was captured.
func TestPartialCaptureSubmittedTwice(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	id := s.authorized(t, "order-capture", 2500)
	op, b := s.signedIn(t, "operator")
	b.open(paymentPath(id))
	require.Equal(t, "AUTHORIZED", b.text("payment-status"))
	require.True(t, b.hasButton("Capture"))
	require.True(t, b.hasButton("Void"))
	require.False(t, b.hasButton("Refund"))
	b.shot("payment-authorized")
	b.fill("Amount", "1800")
	statuses := eval[[]int](b, `(() => { const f = document.querySelector('form[action$="/captures"]');
		const send = () => fetch(f.action, {method: "POST", body: new URLSearchParams(new FormData(f))}).then(r => r.status);
		return Promise.all([send(), send()]); })()`)
	for _, st := range statuses {
		require.Contains(t, []int{http.StatusOK, http.StatusConflict}, st, "done, or the same key still in progress")
	}
	flash := b.submit("Capture")
	require.Regexp(t, `^Capture cap_[0-9a-f]+ of 1800 USD: SUCCEEDED\. This form had been sent already: nothing was done again\.$`, flash)
	require.Equal(t, "SUCCEEDED", b.text("payment-status"))
	require.Equal(t, 1, b.count("capture-row"))
	require.Equal(t, "1800 USD", b.text("capture-amount"))
	require.Equal(t, "SUCCEEDED", b.text("capture-status"))
	require.False(t, b.hasButton("Capture"))
	require.False(t, b.hasButton("Void"))
	require.True(t, b.hasButton("Refund"), "what was captured may be refunded")
	require.Equal(t, 1, s.count(t, `SELECT count(*) FROM captures WHERE payment_id = $1`, id))
	require.Equal(t, int64(1), s.sim.Stats(t).CaptureCalls)
	require.Equal(t, 1800, s.count(t, `SELECT amount_captured FROM payment_attempts WHERE id = $1`, id))
	timeline := eval[string](b, `document.querySelector('[data-testid=timeline]').textContent.replace(/\s+/g, ' ')`)
	require.Contains(t, timeline, "AUTHORIZED → SUCCEEDED console")
	require.Contains(t, timeline, "created; by operator "+op.Email)
	b.shot("capture")
}

// TestVoidFromThePage: Void with a reason releases the authorization: the
// payment is CANCELED, nothing was captured.
func TestVoidFromThePage(t *testing.T) {
	t.Parallel()
	s := startStack(t)
	id := s.authorized(t, "order-void", 1200)
	op, b := s.signedIn(t, "operator")
	b.open(paymentPath(id))
	b.do(setSelect("void-reason", "requested_by_customer"))
	require.Regexp(t, `^Void void_[0-9a-f]+: SUCCEEDED\.$`, b.submit("Void"))
	require.Equal(t, "CANCELED", b.text("payment-status"))
	require.Equal(t, 1, b.count("void-row"))
	require.Equal(t, "requested_by_customer", b.text("void-reason"))
	require.False(t, b.hasButton("Capture"))
	require.Contains(t, eval[string](b, `document.querySelector('[data-testid=timeline]').textContent`), "by operator "+op.Email)
	require.Equal(t, int64(1), s.sim.Stats(t).VoidCalls)
	require.Zero(t, s.sim.Stats(t).CaptureCalls)
	b.shot("void")
}

// TestDeliveryRetry: the merchant's endpoint refused every attempt, so the
// delivery is failed (the overview counts it); once the endpoint is fixed,
// an operator presses Retry on the payment's page and it is delivered.
func TestDeliveryRetry(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	var got atomic.Int64
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			got.Add(1)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(rc.Close)
	s := startStack(t, "OUTBOX_RELAY=on", "NATS_URL="+testkit.NATSURL(),
		"MERCHANT_WEBHOOK_ALLOW_HTTP=true", "MERCHANT_WEBHOOK_ALLOW_PRIVATE=true",
		"MERCHANT_WEBHOOK_TIMEOUT=5s", "MERCHANT_WEBHOOK_RETRY_SCHEDULE=100ms,100ms")
	ep := s.api.MustDo(t, http.MethodPost, "/v1/webhook_endpoints", []byte(`{"url":"`+rc.URL+`/hooks","event_types":["payment.succeeded"]}`),
		map[string]string{"Content-Type": "application/json"})
	require.Equal(t, http.StatusCreated, ep.Status, ep.String())
	id := s.succeeded(t, "order-webhook", 990, nil)
	testkit.Eventually(t, 2*time.Minute, "the delivery failed after three attempts", func() bool {
		return s.count(t, `SELECT count(*) FROM webhook_deliveries WHERE payment_id = $1 AND status = 'failed' AND attempts = 3`, id) == 1
	})
	op, b := s.signedIn(t, "operator")
	require.Equal(t, "1", b.text("count-deliveries-failing"))
	b.open(paymentPath(id))
	require.Equal(t, 1, b.count("delivery-row"))
	require.Equal(t, "failed", b.text("delivery-status"))
	require.Equal(t, "3", b.text("delivery-attempts"))
	require.Contains(t, b.text("delivery-last-code"), "500")
	b.shot("delivery-failed")

	healthy.Store(true)
	require.Regexp(t, `^Delivery whd_[0-9a-f]+ is pending: it is tried again now\.$`, b.submit("Retry"))
	testkit.Eventually(t, time.Minute, "delivered after the retry", func() bool {
		return s.count(t, `SELECT count(*) FROM webhook_deliveries WHERE payment_id = $1 AND status = 'delivered'`, id) == 1
	})
	b.open(paymentPath(id))
	require.Equal(t, "delivered", b.text("delivery-status"))
	require.Equal(t, "4", b.text("delivery-attempts"), "a manual retry does not reset the count")
	require.False(t, b.hasButton("Retry"), "nothing to retry once delivered")
	require.Equal(t, int64(1), got.Load())
	require.Contains(t, eval[string](b, `document.querySelector('[data-testid=timeline]').textContent`), "retry_requested; by operator "+op.Email)
	b.open("/console/")
	require.Equal(t, "0", b.text("count-deliveries-failing"))
	b.open(paymentPath(id))
	b.shot("delivery-retried")
}
