package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/operators"
	"github.com/acme/paymentsvc/internal/payments"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// authorized makes a manual payment the simulator authorized (AUTHORIZED).
func (b *bundle) authorized(amount int64) attempts.Attempt {
	b.t.Helper()
	reply, err := b.svc.Create(b.t.Context(), payments.CreateInput{
		TenantID: b.tenantID, IdempotencyKey: testkit.RandomID("k-"), Fingerprint: testdb.Fingerprint,
		OrderID: testkit.RandomID("order-"), Amount: amount, Currency: "USD", PaymentMethod: "pm_card_visa",
		CaptureMethod: attempts.CaptureManual,
	})
	require.NoError(b.t, err)
	p, err := attempts.Get(b.t.Context(), b.pool, reply.PaymentID)
	require.NoError(b.t, err)
	require.Equal(b.t, lifecycle.Authorized, p.Status)
	return p
}

func (b *bundle) countRows(query string, args ...any) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.pool.QueryRow(b.t.Context(), query, args...).Scan(&n))
	return n
}

// TestPartialCaptureSentTwice: the Capture form of an AUTHORIZED payment
// sent twice captures once, at the provider too; the payment is SUCCEEDED
// with the amount captured; the timeline names the console and the
// operator; the buttons are gone.
func TestPartialCaptureSentTwice(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized(1000)
	a, op := b.signIn(operators.Operator)
	page := a.get("/console/payments/" + p.ID)
	require.Contains(t, page.body, ">Capture</button>")
	require.Contains(t, page.body, ">Void</button>")
	require.NotContains(t, page.body, ">Refund</button>")
	action := "/console/payments/" + p.ID + "/captures"
	form := url.Values{"csrf_token": {csrf(t, page.body)}, "idempotency_key": {formKeyOf(t, page.body, action)}, "amount": {"600"}}
	first := a.post(action, form, nil)
	require.Equal(t, http.StatusOK, first.status, first.body)
	require.Regexp(t, `^Capture cap_[0-9a-f]+ of 600 USD: SUCCEEDED\.$`, flashOf(first.body))
	second := a.post(action, form, nil)
	require.Equal(t, http.StatusOK, second.status)
	require.Regexp(t, `^Capture cap_[0-9a-f]+ of 600 USD: SUCCEEDED\. This form had been sent already: nothing was done again\.$`, flashOf(second.body))
	require.Equal(t, 1, b.countRows(`SELECT count(*) FROM captures WHERE payment_id = $1`, p.ID))
	require.Equal(t, int64(1), b.sim.Stats(t).CaptureCalls)
	got, err := attempts.Get(t.Context(), b.pool, p.ID)
	require.NoError(t, err)
	require.Equal(t, lifecycle.Succeeded, got.Status)
	require.Equal(t, int64(600), got.AmountCaptured)
	require.Equal(t, "SUCCEEDED", testid(t, second.body, "payment-status"))
	require.Equal(t, 1, count(second.body, "capture-row"))
	require.Equal(t, "600 USD", testid(t, second.body, "capture-amount"))
	require.Contains(t, second.body, "captured 6.00 USD")
	require.NotContains(t, second.body, ">Capture</button>")
	require.NotContains(t, second.body, ">Void</button>")
	require.Contains(t, second.body, ">Refund</button>", "600 captured, refundable")
	items := regexp.MustCompile(`(?s)data-testid="timeline-item".*?</li>`).FindAllString(second.body, -1)
	var ofCapture []string
	for _, it := range items {
		if regexp.MustCompile(`capture <a href="#cap_`).MatchString(it) {
			ofCapture = append(ofCapture, it)
		}
	}
	require.Len(t, ofCapture, 3, "the capture's CREATED, PENDING, SUCCEEDED")
	require.Regexp(t, `(?s)new → .*CREATED.*console.*created; by operator `+regexp.QuoteMeta(op.Email), ofCapture[0])
	require.Regexp(t, `(?s)PENDING</span> → .*SUCCEEDED.*console.*at sim`, ofCapture[2])
	require.Regexp(t, `(?s)AUTHORIZED</span> → <span class="badge s-SUCCEEDED">SUCCEEDED</span>.*console`, items[len(items)-1]+items[len(items)-2]+items[len(items)-3])

	over := a.post(action, url.Values{"csrf_token": {csrf(t, page.body)}, "idempotency_key": {"another"}, "amount": {"100"}}, nil)
	require.Equal(t, http.StatusConflict, over.status, "captured already")
	require.Equal(t, 1, b.countRows(`SELECT count(*) FROM captures WHERE payment_id = $1`, p.ID))
}

// TestVoidFromThePage: Void with a reason cancels the authorization; a
// capture more than authorized is refused with the API's status.
func TestVoidFromThePage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized(800)
	a, op := b.signIn(operators.Operator)
	page := a.get("/console/payments/" + p.ID)
	tok := csrf(t, page.body)
	tooMuch := a.post("/console/payments/"+p.ID+"/captures", url.Values{"csrf_token": {tok}, "idempotency_key": {"big"}, "amount": {"801"}}, nil)
	require.Equal(t, http.StatusUnprocessableEntity, tooMuch.status)
	require.Contains(t, flashOf(tooMuch.body), "Capture refused")
	action := "/console/payments/" + p.ID + "/voids"
	form := url.Values{"csrf_token": {tok}, "idempotency_key": {formKeyOf(t, page.body, action)}, "reason": {"duplicate"}}
	res := a.post(action, form, nil)
	require.Equal(t, http.StatusOK, res.status, res.body)
	require.Regexp(t, `^Void void_[0-9a-f]+: SUCCEEDED\.$`, flashOf(res.body))
	require.Equal(t, "CANCELED", testid(t, res.body, "payment-status"))
	require.Equal(t, 1, count(res.body, "void-row"))
	require.Equal(t, "duplicate", testid(t, res.body, "void-reason"))
	require.Contains(t, res.body, "by operator "+op.Email)
	again := a.post(action, form, nil)
	require.Contains(t, flashOf(again.body), "This form had been sent already")
	require.Equal(t, int64(1), b.sim.Stats(t).VoidCalls)
	require.Zero(t, b.sim.Stats(t).CaptureCalls)
}

// TestViewerMayNotCaptureVoidOrRetry: no such buttons for a viewer, and
// its POSTs (with its session's token) answer 403 and do nothing.
func TestViewerMayNotCaptureVoidOrRetry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.authorized(500)
	a, _ := b.signIn(operators.Viewer)
	page := a.get("/console/payments/" + p.ID)
	for _, label := range []string{"Capture", "Void", "Retry"} {
		require.NotContains(t, page.body, ">"+label+"</button>")
	}
	tok := csrf(t, page.body)
	for _, path := range []string{"/captures", "/voids", "/deliveries/whd_x/retry"} {
		res := a.post("/console/payments/"+p.ID+path, url.Values{"csrf_token": {tok}, "idempotency_key": {"forged"}, "amount": {"500"}}, nil)
		require.Equal(t, http.StatusForbidden, res.status, path)
	}
	require.Zero(t, b.countRows(`SELECT count(*) FROM captures`))
}

// TestRetryADelivery: a failed merchant delivery of the payment shows in
// its row with Retry; the form sent twice retries once (pending, due now),
// audited with source console and the operator; the overview counts it
// failing.
func TestRetryADelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	p := b.pay(700, nil, nil)
	ctx := t.Context()
	_, err := b.pool.Exec(ctx, `INSERT INTO webhook_endpoints (id, tenant_id, url, secret) VALUES ('we_1', $1, 'https://shop.example/<hooks>?token=s3cret', 'whsec_x')`, b.tenantID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO webhook_messages (event_id, tenant_id, event_type, payment_id, body, created_at) VALUES ('evt_1', $1, 'payment.succeeded', $2, '{}', now())`, b.tenantID, p.ID)
	require.NoError(t, err)
	_, err = b.pool.Exec(ctx, `INSERT INTO webhook_deliveries (id, tenant_id, endpoint_id, event_id, event_type, payment_id, status, attempts, last_status_code, last_error)
		VALUES ('whd_1', $1, 'we_1', 'evt_1', 'payment.succeeded', $2, 'failed', 8, 500, 'HTTP 500')`, b.tenantID, p.ID)
	require.NoError(t, err)

	viewer, _ := b.signIn(operators.Viewer)
	require.Equal(t, "1", testid(t, viewer.get("/console/").body, "count-deliveries-failing"))
	vpage := viewer.get("/console/payments/" + p.ID)
	require.Equal(t, 1, count(vpage.body, "delivery-row"))
	require.NotContains(t, vpage.body, ">Retry</button>")

	a, op := b.signIn(operators.Operator)
	page := a.get("/console/payments/" + p.ID)
	require.Equal(t, 1, count(page.body, "delivery-row"))
	require.Contains(t, page.body, "https://shop.example/%3Chooks%3E?token=***", "as text, its token masked")
	require.NotContains(t, page.body, "s3cret")
	require.Equal(t, "failed", testid(t, page.body, "delivery-status"))
	require.Equal(t, "8", testid(t, page.body, "delivery-attempts"))
	action := "/console/payments/" + p.ID + "/deliveries/whd_1/retry"
	form := url.Values{"csrf_token": {csrf(t, page.body)}, "idempotency_key": {formKeyOf(t, page.body, action)}}
	first := a.post(action, form, nil)
	require.Equal(t, http.StatusOK, first.status, first.body)
	require.Equal(t, "Delivery whd_1 is pending: it is tried again now.", flashOf(first.body))
	require.Equal(t, "pending", testid(t, first.body, "delivery-status"))
	second := a.post(action, form, nil)
	require.Equal(t, "Delivery whd_1 is pending. This form had been sent already: nothing was done again.", flashOf(second.body))
	require.Equal(t, 1, b.countRows(`SELECT count(*) FROM webhook_delivery_events WHERE delivery_id = 'whd_1' AND source = 'console' AND reason = $1`,
		"retry_requested; by operator "+op.Email))
	require.Contains(t, second.body, "retry_requested; by operator "+op.Email, "in the timeline")
	require.Equal(t, http.StatusNotFound, a.post("/console/payments/"+p.ID+"/deliveries/whd_nothing/retry",
		url.Values{"csrf_token": {csrf(t, page.body)}, "idempotency_key": {"k"}}, nil).status)
	other := b.pay(300, nil, nil)
	require.Equal(t, http.StatusNotFound, a.post("/console/payments/"+other.ID+"/deliveries/whd_1/retry",
		url.Values{"csrf_token": {csrf(t, page.body)}, "idempotency_key": {"k2"}}, nil).status, "not that payment's")
}
