package providersim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82"
	"github.com/stripe/stripe-go/v82/webhook"
)

// The Stripe face is tested with the official SDK as its client, so the
// wire format is the one a client someone else wrote expects.

// stripeSetup starts a simulator with SIM_API=stripe and an SDK client of
// it with the SDK's own retries off (every try is the test's).
func stripeSetup(t *testing.T, cfg Config) (*bundle, *stripe.Client) {
	t.Helper()
	cfg.API = APIStripe
	b := setup(t, cfg)
	return b, stripeClient(b.url, testAPIKey)
}

func stripeClient(url, key string) *stripe.Client {
	backends := stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL:               stripe.String(url),
		MaxNetworkRetries: stripe.Int64(0),
		LeveledLogger:     &stripe.LeveledLogger{Level: stripe.LevelNull},
		HTTPClient:        &http.Client{Timeout: 10 * time.Second},
	})
	return stripe.NewClient(key, stripe.WithBackends(backends))
}

var ctx = context.Background()

// piParams is a confirmed off-session card PaymentIntent as the connector
// makes it.
func piParams(key string, amount int64, pm, captureMethod, paymentID string) *stripe.PaymentIntentCreateParams {
	p := &stripe.PaymentIntentCreateParams{
		Amount: stripe.Int64(amount), Currency: stripe.String("usd"), PaymentMethod: stripe.String(pm),
		Confirm: stripe.Bool(true), OffSession: stripe.Bool(true), PaymentMethodTypes: []*string{stripe.String("card")},
		CaptureMethod: stripe.String(captureMethod), Metadata: map[string]string{"psvc_payment": paymentID},
	}
	p.AddExpand("latest_charge")
	if key != "" {
		p.SetIdempotencyKey(key)
	}
	return p
}

// stripeErrOf is err as the SDK's *stripe.Error.
func stripeErrOf(t *testing.T, err error) *stripe.Error {
	t.Helper()
	var se *stripe.Error
	require.ErrorAs(t, err, &se)
	return se
}

func TestStripeCreateAutomaticAndRetrieve(t *testing.T) {
	b, sc := stripeSetup(t, Config{})
	pi, err := sc.V1PaymentIntents.Create(ctx, piParams("k-auto", 1250, "pm_card_visa", "automatic", "pay_1"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(pi.ID, "pi_"), pi.ID)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, pi.Status)
	require.Equal(t, int64(1250), pi.Amount)
	require.Equal(t, int64(1250), pi.AmountReceived)
	require.Equal(t, int64(0), pi.AmountCapturable)
	require.Equal(t, stripe.Currency("usd"), pi.Currency)
	require.Equal(t, stripe.PaymentIntentCaptureMethodAutomatic, pi.CaptureMethod)
	require.Equal(t, map[string]string{"psvc_payment": "pay_1"}, pi.Metadata)
	require.NotNil(t, pi.LatestCharge)
	require.Equal(t, "ch_"+strings.TrimPrefix(pi.ID, "pi_"), pi.LatestCharge.ID)
	require.Equal(t, int64(1250), pi.LatestCharge.AmountCaptured, "the expanded charge")
	require.Empty(t, pi.LastResponse.Header.Get("Idempotent-Replayed"))

	got, err := sc.V1PaymentIntents.Retrieve(ctx, pi.ID, nil)
	require.NoError(t, err)
	require.Equal(t, pi.ID, got.ID)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)
	require.Equal(t, pi.LatestCharge.ID, got.LatestCharge.ID, "latest_charge as an id")

	_, err = sc.V1PaymentIntents.Retrieve(ctx, "pi_nope", nil)
	se := stripeErrOf(t, err)
	require.Equal(t, http.StatusNotFound, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeResourceMissing, se.Code)

	// The same state as the simulator's API: the control API sees it.
	chs := b.charges()
	require.Len(t, chs, 1)
	require.Equal(t, pi.ID, chs[0].ID)
	require.Equal(t, "pay_1", chs[0].Reference)
	require.Equal(t, "k-auto", chs[0].IdempotencyKey)
	require.Equal(t, "USD", chs[0].Currency, "the control API shows currencies as the simulator's API does")
	require.Equal(t, StatusSucceeded, chs[0].Status)
	require.Equal(t, Stats{ChargeCalls: 1, Charges: 1}, b.stats())
}

func TestStripeWrongKeyIs401(t *testing.T) {
	b, _ := stripeSetup(t, Config{})
	_, err := stripeClient(b.url, "sk_wrong").V1PaymentIntents.Retrieve(ctx, "pi_x", nil)
	se := stripeErrOf(t, err)
	require.Equal(t, http.StatusUnauthorized, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
	require.Equal(t, Stats{}, b.stats())
}

func TestStripeDeclines(t *testing.T) {
	for _, tc := range []struct{ pm, code, decline string }{
		{"pm_card_chargeDeclined", "card_declined", "generic_decline"},
		{"pm_card_chargeDeclinedInsufficientFunds", "card_declined", "insufficient_funds"},
		{"pm_card_declined", "card_declined", "generic_decline"},
		{"pm_card_chargeDeclinedExpiredCard", "expired_card", "expired_card"},
	} {
		t.Run(tc.pm, func(t *testing.T) {
			b, sc := stripeSetup(t, Config{})
			_, err := sc.V1PaymentIntents.Create(ctx, piParams("k", 500, tc.pm, "automatic", "pay_d"))
			se := stripeErrOf(t, err)
			require.Equal(t, http.StatusPaymentRequired, se.HTTPStatusCode)
			require.Equal(t, stripe.ErrorTypeCard, se.Type)
			require.Equal(t, stripe.ErrorCode(tc.code), se.Code)
			require.Equal(t, stripe.DeclineCode(tc.decline), se.DeclineCode)
			require.NotNil(t, se.PaymentIntent)
			require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, se.PaymentIntent.Status)
			require.NotNil(t, se.PaymentIntent.LastPaymentError)
			require.Equal(t, stripe.DeclineCode(tc.decline), se.PaymentIntent.LastPaymentError.DeclineCode)

			// Recorded, and replayed under its key.
			_, err = sc.V1PaymentIntents.Create(ctx, piParams("k", 500, tc.pm, "automatic", "pay_d"))
			require.Equal(t, se.PaymentIntent.ID, stripeErrOf(t, err).PaymentIntent.ID)
			require.Equal(t, Stats{ChargeCalls: 2, Charges: 1}, b.stats())
			got, err := sc.V1PaymentIntents.Retrieve(ctx, se.PaymentIntent.ID, nil)
			require.NoError(t, err)
			require.Equal(t, stripe.PaymentIntentStatusRequiresPaymentMethod, got.Status)
			require.Equal(t, StatusFailed, b.charges()[0].Status)
		})
	}
}

func TestStripeManualPartialCaptureAndRefund(t *testing.T) {
	b, sc := stripeSetup(t, Config{AuthTTL: time.Hour})
	pi, err := sc.V1PaymentIntents.Create(ctx, piParams("k-man", 1000, "pm_card_visa", "manual", "pay_m"))
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, pi.Status)
	require.Equal(t, int64(1000), pi.AmountCapturable)
	require.Equal(t, int64(0), pi.AmountReceived)
	require.Equal(t, pi.Created+3600, pi.LatestCharge.PaymentMethodDetails.Card.CaptureBefore, "capture_before")

	cp := &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(1001)}
	cp.SetIdempotencyKey("cap-too-much")
	_, err = sc.V1PaymentIntents.Capture(ctx, pi.ID, cp)
	se := stripeErrOf(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorCodeAmountTooLarge, se.Code)

	cp = &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(600)}
	cp.AddMetadata("psvc_capture_key", "cap-1")
	cp.SetIdempotencyKey("cap-1")
	got, err := sc.V1PaymentIntents.Capture(ctx, pi.ID, cp)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)
	require.Equal(t, map[string]string{"psvc_payment": "pay_m", "psvc_capture_key": "cap-1"}, got.Metadata, "the capture's metadata joins the PaymentIntent's")
	require.Equal(t, int64(600), got.AmountReceived)
	require.Equal(t, int64(0), got.AmountCapturable)

	// Capturing a succeeded PaymentIntent, under another key.
	cp = &stripe.PaymentIntentCaptureParams{}
	cp.SetIdempotencyKey("cap-2")
	_, err = sc.V1PaymentIntents.Capture(ctx, pi.ID, cp)
	se = stripeErrOf(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
	require.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, se.Code)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, se.PaymentIntent.Status)

	// Refunds are limited to what was captured.
	rp := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Amount: stripe.Int64(601)}
	rp.SetIdempotencyKey("re-too-much")
	_, err = sc.V1Refunds.Create(ctx, rp)
	require.Equal(t, stripe.ErrorCodeAmountTooLarge, stripeErrOf(t, err).Code)
	rp = &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID), Reason: stripe.String("requested_by_customer"),
		Metadata: map[string]string{"psvc_refund": "ref_1", "psvc_reason": "changed mind"}}
	rp.SetIdempotencyKey("re-1")
	re, err := sc.V1Refunds.Create(ctx, rp)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(re.ID, "re_"), re.ID)
	require.Equal(t, int64(600), re.Amount, "no amount: the whole captured rest")
	require.Equal(t, pi.ID, re.PaymentIntent.ID)
	require.Equal(t, stripe.RefundStatusSucceeded, re.Status)
	require.Equal(t, stripe.RefundReasonRequestedByCustomer, re.Reason)
	require.Equal(t, "ref_1", re.Metadata["psvc_refund"])

	got2, err := sc.V1Refunds.Retrieve(ctx, re.ID, nil)
	require.NoError(t, err)
	require.Equal(t, re.ID, got2.ID)
	var ids []string
	for r, err := range sc.V1Refunds.List(ctx, &stripe.RefundListParams{PaymentIntent: stripe.String(pi.ID)}) {
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	require.Equal(t, []string{re.ID}, ids)
	require.Equal(t, "ref_1", b.sim.st.refunds[re.ID].Reference)
	require.Equal(t, Stats{ChargeCalls: 1, Charges: 1, CaptureCalls: 3, RefundCalls: 2, Refunds: 1}, b.stats())
}

func TestStripeCancelAndExpiry(t *testing.T) {
	b, sc := stripeSetup(t, Config{})
	pi, err := sc.V1PaymentIntents.Create(ctx, piParams("k-1", 700, "pm_card_visa", "manual", "pay_v"))
	require.NoError(t, err)
	_, err = sc.V1PaymentIntents.Cancel(ctx, pi.ID, &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String("bogus")})
	require.Equal(t, http.StatusBadRequest, stripeErrOf(t, err).HTTPStatusCode)

	got, err := sc.V1PaymentIntents.Cancel(ctx, pi.ID, &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String("requested_by_customer")})
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, got.Status)
	require.Equal(t, stripe.PaymentIntentCancellationReasonRequestedByCustomer, got.CancellationReason)
	require.Equal(t, int64(0), got.AmountCapturable)
	_, err = sc.V1PaymentIntents.Capture(ctx, pi.ID, nil)
	se := stripeErrOf(t, err)
	require.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, se.Code)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, se.PaymentIntent.Status)
	require.Equal(t, StatusVoided, b.charges()[0].Status)

	// An authorization that expires is canceled "automatic".
	pi2, err := sc.V1PaymentIntents.Create(ctx, piParams("k-2", 800, "pm_card_visa", "manual", "pay_e"))
	require.NoError(t, err)
	r := b.do(http.MethodPost, "/_sim/charges/"+pi2.ID+"/expire", "", nil)
	require.Equal(t, http.StatusOK, r.status)
	got, err = sc.V1PaymentIntents.Retrieve(ctx, pi2.ID, nil)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusCanceled, got.Status)
	require.Equal(t, stripe.PaymentIntentCancellationReasonAutomatic, got.CancellationReason)
	_, err = sc.V1PaymentIntents.Capture(ctx, pi2.ID, nil)
	require.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, stripeErrOf(t, err).Code)
	_, err = sc.V1PaymentIntents.Cancel(ctx, pi2.ID, nil)
	require.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, stripeErrOf(t, err).Code)
}

func TestStripeListPaginatesNewestFirst(t *testing.T) {
	now := time.Unix(1_760_000_000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	b, sc := stripeSetup(t, Config{now: clock})
	var made []string
	for i := range 5 {
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		pi, err := sc.V1PaymentIntents.Create(ctx, piParams("", int64(100+i), "pm_card_visa", "automatic", "pay"))
		require.NoError(t, err)
		made = append(made, pi.ID)
	}
	// Created at +1s … +5s; created[gte] +2s keeps the last four.
	params := &stripe.PaymentIntentListParams{CreatedRange: &stripe.RangeQueryParams{
		GreaterThanOrEqual: 1_760_000_002, LesserThan: 1_760_000_100,
	}}
	params.Limit = stripe.Int64(3)
	var listed []string
	for pi, err := range sc.V1PaymentIntents.List(ctx, params) {
		require.NoError(t, err)
		listed = append(listed, pi.ID)
	}
	require.Equal(t, []string{made[4], made[3], made[2], made[1]}, listed, "every page, newest first")

	// The envelope itself: two pages of three and one.
	r := b.stripeGet("/v1/payment_intents?limit=3&created[gt]=1760000001")
	var page1 struct {
		Object  string
		Data    []struct{ ID string }
		HasMore bool `json:"has_more"`
		URL     string
	}
	require.NoError(t, json.Unmarshal(r.body, &page1))
	require.Equal(t, "list", page1.Object)
	require.Equal(t, "/v1/payment_intents", page1.URL)
	require.True(t, page1.HasMore)
	require.Len(t, page1.Data, 3)
	r = b.stripeGet("/v1/payment_intents?limit=3&created[gt]=1760000001&starting_after=" + page1.Data[2].ID)
	require.NoError(t, json.Unmarshal(r.body, &page1))
	require.False(t, page1.HasMore)
	require.Len(t, page1.Data, 1)
	require.Equal(t, made[1], page1.Data[0].ID)

	r = b.stripeGet("/v1/payment_intents?limit=101")
	require.Equal(t, http.StatusBadRequest, r.status)
}

func (b *bundle) stripeGet(path string) reply {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.url+path, nil)
	require.NoError(b.t, err)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	return send(b.t, b.client, req)
}

// stripePost sends a form-encoded POST as a client would, with key.
func (b *bundle) stripePost(path, key string, form url.Values) reply {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.url+path, strings.NewReader(form.Encode()))
	require.NoError(b.t, err)
	req.Header.Set("Authorization", "Bearer "+testAPIKey)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return send(b.t, b.client, req)
}

func TestStripeIdempotentReplayAndChangedParameters(t *testing.T) {
	b, sc := stripeSetup(t, Config{})
	first, err := sc.V1PaymentIntents.Create(ctx, piParams("k-same", 900, "pm_card_visa", "automatic", "pay_i"))
	require.NoError(t, err)
	again, err := sc.V1PaymentIntents.Create(ctx, piParams("k-same", 900, "pm_card_visa", "automatic", "pay_i"))
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, Stats{ChargeCalls: 2, Charges: 1}, b.stats())

	_, err = sc.V1PaymentIntents.Create(ctx, piParams("k-same", 901, "pm_card_visa", "automatic", "pay_i"))
	se := stripeErrOf(t, err)
	require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	require.Equal(t, stripe.ErrorCode("idempotency_error"), se.Code)
	// The same key on another endpoint is another request too.
	rp := &stripe.RefundCreateParams{PaymentIntent: stripe.String(first.ID)}
	rp.SetIdempotencyKey("k-same")
	_, err = sc.V1Refunds.Create(ctx, rp)
	require.Equal(t, stripe.ErrorTypeIdempotency, stripeErrOf(t, err).Type)
	require.Equal(t, Stats{ChargeCalls: 3, Charges: 1, RefundCalls: 1}, b.stats())

	// A request that fails validation stores nothing: fixed, the key works.
	r := b.stripePost("/v1/payment_intents", "k-fix", url.Values{"currency": {"usd"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"}})
	require.Equal(t, http.StatusBadRequest, r.status)
	fixed, err := sc.V1PaymentIntents.Create(ctx, piParams("k-fix", 100, "pm_card_visa", "automatic", "pay_f"))
	require.NoError(t, err)
	require.Empty(t, fixed.LastResponse.Header.Get("Idempotent-Replayed"))
}

func TestStripeKeyInFlightIs409(t *testing.T) {
	b, sc := stripeSetup(t, Config{})
	b.setFaults(Faults{LatencyMS: 3000})
	done := make(chan error, 1)
	var first *stripe.PaymentIntent
	go func() {
		var err error
		first, err = sc.V1PaymentIntents.Create(ctx, piParams("k-busy", 300, "pm_card_visa", "automatic", "pay_b"))
		done <- err
	}()
	eventually(t, "the first call to start", func() bool { return b.sim.chargeCalls.Load() == 1 })
	_, err := sc.V1PaymentIntents.Create(ctx, piParams("k-busy", 300, "pm_card_visa", "automatic", "pay_b"))
	se := stripeErrOf(t, err)
	require.Equal(t, http.StatusConflict, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeIdempotency, se.Type)
	require.Equal(t, stripe.ErrorCode("idempotency_key_in_use"), se.Code)
	require.NoError(t, <-done)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, first.Status)
	b.setFaults(Faults{})
	again, err := sc.V1PaymentIntents.Create(ctx, piParams("k-busy", 300, "pm_card_visa", "automatic", "pay_b"))
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, int64(1), b.stats().Charges)
}

func TestStripeLostAnswerAfterCommit(t *testing.T) {
	b, sc := stripeSetup(t, Config{})
	b.setFaults(Faults{DropAfterCommit: true})
	_, err := sc.V1PaymentIntents.Create(ctx, piParams("k-lost", 400, "pm_card_visa", "automatic", "pay_l"))
	require.Error(t, err)
	var se *stripe.Error
	require.False(t, errors.As(err, &se), "no answer at all: %v", err)
	chs := b.charges()
	require.Len(t, chs, 1, "the PaymentIntent was made")
	b.setFaults(Faults{})
	got, err := sc.V1PaymentIntents.Create(ctx, piParams("k-lost", 400, "pm_card_visa", "automatic", "pay_l"))
	require.NoError(t, err)
	require.Equal(t, chs[0].ID, got.ID)
	require.Equal(t, "true", got.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, int64(1), b.stats().Charges)
}

func TestStripeFaultAnswers(t *testing.T) {
	b, sc := stripeSetup(t, Config{})
	// A 500 is stored under its key, as Stripe stores it.
	b.setFaults(Faults{ErrorRate: 1, ErrorStatus: 500})
	_, err := sc.V1PaymentIntents.Create(ctx, piParams("k-500", 400, "pm_card_visa", "automatic", "pay_5"))
	se := stripeErrOf(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode)
	require.Equal(t, stripe.ErrorTypeAPI, se.Type)
	b.setFaults(Faults{})
	_, err = sc.V1PaymentIntents.Create(ctx, piParams("k-500", 400, "pm_card_visa", "automatic", "pay_5"))
	se = stripeErrOf(t, err)
	require.Equal(t, http.StatusInternalServerError, se.HTTPStatusCode, "the saved 500")
	require.Equal(t, int64(0), b.stats().Charges)

	// 429 and 503 are answered in front of the API: nothing is stored.
	for _, status := range []int{429, 503} {
		b.setFaults(Faults{ErrorRate: 1, ErrorStatus: status})
		r := b.stripePost("/v1/payment_intents", "k-front", url.Values{"amount": {"10"}, "currency": {"usd"},
			"payment_method": {"pm_card_visa"}, "confirm": {"true"}})
		require.Equal(t, status, r.status)
		if status == 429 {
			require.Equal(t, "rate_limit", decode[struct{ Error struct{ Code string } }](t, r).Error.Code)
		} else {
			require.Equal(t, "true", r.header.Get("Stripe-Should-Retry"))
		}
	}
	b.setFaults(Faults{})
	r := b.stripePost("/v1/payment_intents", "k-front", url.Values{"amount": {"10"}, "currency": {"usd"},
		"payment_method": {"pm_card_visa"}, "confirm": {"true"}})
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	require.Empty(t, r.header.Get("Idempotent-Replayed"))
	require.Equal(t, int64(1), b.stats().Charges)
	// A replay meets the faults too, and keeps its first answer.
	b.setFaults(Faults{ErrorRate: 1, ErrorStatus: 500})
	again := b.stripePost("/v1/payment_intents", "k-front", url.Values{"amount": {"10"}, "currency": {"usd"},
		"payment_method": {"pm_card_visa"}, "confirm": {"true"}})
	require.Equal(t, http.StatusInternalServerError, again.status)
	b.setFaults(Faults{})
	again = b.stripePost("/v1/payment_intents", "k-front", url.Values{"amount": {"10"}, "currency": {"usd"},
		"payment_method": {"pm_card_visa"}, "confirm": {"true"}})
	require.Equal(t, http.StatusOK, again.status)
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	require.Equal(t, string(r.body), string(again.body))

	// Refund faults only with "refunds":true, as in the simulator's API.
	b.setFaults(Faults{ErrorRate: 1, ErrorStatus: 503})
	var pi struct{ ID string }
	require.NoError(t, json.Unmarshal(r.body, &pi))
	rp := &stripe.RefundCreateParams{PaymentIntent: stripe.String(pi.ID)}
	_, err = sc.V1Refunds.Create(ctx, rp)
	require.NoError(t, err)
}

// stripeReceiver records the Stripe-Signature deliveries it gets.
type stripeReceiver struct {
	mu   sync.Mutex
	got  []stripeDelivery
	srvd *httptest.Server
}

type stripeDelivery struct {
	header string
	body   []byte
}

func newStripeReceiver(t *testing.T) *stripeReceiver {
	rc := &stripeReceiver{}
	rc.srvd = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		rc.got = append(rc.got, stripeDelivery{header: r.Header.Get("Stripe-Signature"), body: body})
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.srvd.Close)
	return rc
}

func (rc *stripeReceiver) deliveries() []stripeDelivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]stripeDelivery(nil), rc.got...)
}

func TestStripeWebhooksVerifyWithTheSDK(t *testing.T) {
	require.Equal(t, stripe.APIVersion, StripeAPIVersion, "the events' api_version is the SDK's")
	rc := newStripeReceiver(t)
	_, sc := stripeSetup(t, Config{WebhookURL: rc.srvd.URL, WebhookSecret: testWebhookSecret})
	auto, err := sc.V1PaymentIntents.Create(ctx, piParams("k-a", 100, "pm_card_visa", "automatic", "pay_a"))
	require.NoError(t, err)
	_, err = sc.V1PaymentIntents.Create(ctx, piParams("k-d", 100, "pm_card_chargeDeclinedInsufficientFunds", "automatic", "pay_d"))
	require.Error(t, err)
	man, err := sc.V1PaymentIntents.Create(ctx, piParams("k-m", 300, "pm_card_visa", "manual", "pay_m"))
	require.NoError(t, err)
	_, err = sc.V1PaymentIntents.Capture(ctx, man.ID, &stripe.PaymentIntentCaptureParams{AmountToCapture: stripe.Int64(200)})
	require.NoError(t, err)
	void, err := sc.V1PaymentIntents.Create(ctx, piParams("k-v", 300, "pm_card_visa", "manual", "pay_v"))
	require.NoError(t, err)
	_, err = sc.V1PaymentIntents.Cancel(ctx, void.ID, &stripe.PaymentIntentCancelParams{CancellationReason: stripe.String("abandoned")})
	require.NoError(t, err)
	_, err = sc.V1Refunds.Create(ctx, &stripe.RefundCreateParams{PaymentIntent: stripe.String(auto.ID), Metadata: map[string]string{"psvc_refund": "ref_w"}})
	require.NoError(t, err)

	const want = 8 // succeeded, payment_failed, capturable, succeeded, capturable, canceled, refund.created, charge.refunded
	eventually(t, "eight deliveries", func() bool { return len(rc.deliveries()) == want })
	types := map[string]int{}
	for _, d := range rc.deliveries() {
		require.Contains(t, d.header, "t=")
		ev, err := webhook.ConstructEventWithOptions(d.body, d.header, testWebhookSecret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
		require.NoError(t, err, "stripe-go verifies the signature of %s", d.body)
		_, err = webhook.ConstructEventWithOptions(d.body, d.header, "whsec_other", webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
		require.Error(t, err, "another secret does not verify")
		require.Equal(t, "event", ev.Object)
		require.True(t, strings.HasPrefix(ev.ID, "evt_"))
		types[string(ev.Type)]++
		switch ev.Type {
		case "payment_intent.succeeded", "payment_intent.payment_failed", "payment_intent.amount_capturable_updated", "payment_intent.canceled":
			var pi stripe.PaymentIntent
			require.NoError(t, json.Unmarshal(ev.Data.Raw, &pi))
			require.NotEmpty(t, pi.Metadata["psvc_payment"])
			switch {
			case ev.Type == "payment_intent.payment_failed":
				require.Equal(t, stripe.DeclineCode("insufficient_funds"), pi.LastPaymentError.DeclineCode)
			case ev.Type == "payment_intent.canceled":
				require.Equal(t, void.ID, pi.ID)
				require.Equal(t, stripe.PaymentIntentCancellationReasonAbandoned, pi.CancellationReason)
			case ev.Type == "payment_intent.succeeded" && pi.ID == man.ID:
				require.Equal(t, int64(200), pi.AmountReceived)
			}
		case "refund.created":
			var re stripe.Refund
			require.NoError(t, json.Unmarshal(ev.Data.Raw, &re))
			require.Equal(t, auto.ID, re.PaymentIntent.ID)
			require.Equal(t, "ref_w", re.Metadata["psvc_refund"])
		case "charge.refunded":
			var ch stripe.Charge
			require.NoError(t, json.Unmarshal(ev.Data.Raw, &ch))
			require.Equal(t, auto.ID, ch.PaymentIntent.ID)
			require.True(t, ch.Refunded)
		}
	}
	require.Equal(t, map[string]int{
		"payment_intent.succeeded": 2, "payment_intent.payment_failed": 1, "payment_intent.amount_capturable_updated": 2,
		"payment_intent.canceled": 1, "refund.created": 1, "charge.refunded": 1,
	}, types)
}

func TestStripeKeysSurviveARestart(t *testing.T) {
	file := t.TempDir() + "/state.json"
	b, sc := stripeSetup(t, Config{StateFile: file})
	first, err := sc.V1PaymentIntents.Create(ctx, piParams("k-keep", 100, "pm_card_visa", "automatic", "pay_k"))
	require.NoError(t, err)
	require.NoError(t, b.sim.Close())

	b2, sc2 := stripeSetup(t, Config{StateFile: file})
	again, err := sc2.V1PaymentIntents.Create(ctx, piParams("k-keep", 100, "pm_card_visa", "automatic", "pay_k"))
	require.NoError(t, err)
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))
	_, err = sc2.V1PaymentIntents.Create(ctx, piParams("k-keep", 101, "pm_card_visa", "automatic", "pay_k"))
	require.Equal(t, stripe.ErrorTypeIdempotency, stripeErrOf(t, err).Type)
	chs := b2.charges()
	require.Len(t, chs, 1)
	require.Equal(t, map[string]string{"psvc_payment": "pay_k"}, chs[0].Metadata.Map())
}

func TestStripeCreateThenConfirm(t *testing.T) {
	rc := newStripeReceiver(t)
	b, sc := stripeSetup(t, Config{AuthTTL: time.Hour, WebhookURL: rc.srvd.URL, WebhookSecret: testWebhookSecret})
	create := func(key, method, pm string) *stripe.PaymentIntent {
		p := piParams(key, 500, pm, method, "pay_c")
		p.Confirm = stripe.Bool(false)
		pi, err := sc.V1PaymentIntents.Create(ctx, p)
		require.NoError(t, err)
		require.Equal(t, stripe.PaymentIntentStatusRequiresConfirmation, pi.Status)
		require.Nil(t, pi.LatestCharge, "nothing charged yet")
		return pi
	}
	pi := create("k-c1", "automatic", "pm_card_visa")
	require.Equal(t, int64(1), b.stats().Charges)

	cp := &stripe.PaymentIntentConfirmParams{OffSession: stripe.Bool(true)}
	cp.SetIdempotencyKey("k-c1-confirm")
	got, err := sc.V1PaymentIntents.Confirm(ctx, pi.ID, cp)
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusSucceeded, got.Status)
	require.Equal(t, int64(500), got.AmountReceived)
	again, err := sc.V1PaymentIntents.Confirm(ctx, pi.ID, cp)
	require.NoError(t, err)
	require.Equal(t, "true", again.LastResponse.Header.Get("Idempotent-Replayed"))
	cp2 := &stripe.PaymentIntentConfirmParams{}
	cp2.SetIdempotencyKey("k-c1-confirm-2")
	_, err = sc.V1PaymentIntents.Confirm(ctx, pi.ID, cp2)
	require.Equal(t, stripe.ErrorCodePaymentIntentUnexpectedState, stripeErrOf(t, err).Code, "a succeeded PaymentIntent is not confirmed twice")

	man := create("k-c2", "manual", "pm_card_visa")
	got, err = sc.V1PaymentIntents.Confirm(ctx, man.ID, &stripe.PaymentIntentConfirmParams{})
	require.NoError(t, err)
	require.Equal(t, stripe.PaymentIntentStatusRequiresCapture, got.Status)

	dec := create("k-c3", "automatic", "pm_card_visa")
	_, err = sc.V1PaymentIntents.Confirm(ctx, dec.ID, &stripe.PaymentIntentConfirmParams{PaymentMethod: stripe.String("pm_card_authenticationRequired")})
	se := stripeErrOf(t, err)
	require.Equal(t, http.StatusPaymentRequired, se.HTTPStatusCode)
	require.Equal(t, stripe.DeclineCode("authentication_required"), se.DeclineCode)
	st := b.stats()
	require.Equal(t, int64(8), st.ChargeCalls, "three creates and five confirms")
	require.Equal(t, int64(3), st.Charges)

	// Webhooks only for what was decided: succeeded, capturable, failed.
	eventually(t, "three deliveries", func() bool { return len(rc.deliveries()) == 3 })
}

// A payment method the face does not know answers Stripe's 400
// resource_missing (param payment_method) and makes nothing; the answer is
// stored under the key like Stripe's, so the same request replays it.
func TestStripeUnknownPaymentMethodIsResourceMissing(t *testing.T) {
	b, sc := stripeSetup(t, Config{})
	for _, pm := range []string{"pm_card_bogus", "card_1"} {
		_, err := sc.V1PaymentIntents.Create(ctx, piParams("k-bogus-"+pm, 500, pm, "automatic", "pay_"+pm))
		se := stripeErrOf(t, err)
		require.Equal(t, http.StatusBadRequest, se.HTTPStatusCode)
		require.Equal(t, stripe.ErrorTypeInvalidRequest, se.Type)
		require.Equal(t, stripe.ErrorCode("resource_missing"), se.Code)
		require.Equal(t, "payment_method", se.Param)
		require.Nil(t, se.PaymentIntent)
	}
	_, err := sc.V1PaymentIntents.Create(ctx, piParams("k-bogus-pm_card_bogus", 500, "pm_card_bogus", "automatic", "pay_pm_card_bogus"))
	se := stripeErrOf(t, err)
	require.Equal(t, stripe.ErrorCode("resource_missing"), se.Code)
	require.Equal(t, "true", se.LastResponse.Header.Get("Idempotent-Replayed"))
	require.Equal(t, Stats{ChargeCalls: 3}, b.stats())
	// Stripe's test cards and other pm_ ids (saved ones, taken on trust) are known.
	for _, pm := range []string{"pm_card_visa", "pm_card_mastercard", "pm_card_chargeDeclined", "pm_1Abc"} {
		_, err := sc.V1PaymentIntents.Create(ctx, piParams("k-known-"+pm, 500, pm, "automatic", "pay_"+pm))
		if err != nil {
			require.Equal(t, http.StatusPaymentRequired, stripeErrOf(t, err).HTTPStatusCode, pm)
		}
	}
	require.Equal(t, int64(4), b.stats().Charges)
}
