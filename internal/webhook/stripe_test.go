package webhook

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/stripe/stripe-go/v82"

	"github.com/acme/paymentsvc/internal/apiclient"
	"github.com/acme/paymentsvc/internal/attempts"
	"github.com/acme/paymentsvc/internal/captures"
	"github.com/acme/paymentsvc/internal/db"
	"github.com/acme/paymentsvc/internal/lifecycle"
	"github.com/acme/paymentsvc/internal/proctest"
	"github.com/acme/paymentsvc/internal/providersim"
	"github.com/acme/paymentsvc/internal/refunds"
	"github.com/acme/paymentsvc/internal/settings"
	"github.com/acme/paymentsvc/internal/testdb"
	"github.com/acme/paymentsvc/internal/testkit"
)

// A Stripe provider's endpoint: Stripe events, Stripe-Signature.

const stripeHookPath = "/v1/webhooks/stripe"

// stripeSetup is setup for a provider named "stripe" of type stripe.
func stripeSetup(t *testing.T, secrets ...string) *bundle {
	t.Helper()
	if len(secrets) == 0 {
		secrets = []string{testSecret}
	}
	tdb := testdb.New(t)
	h := NewHandler(tdb.Pool, "stripe", secrets, slog.New(slog.DiscardHandler))
	h.Type = settings.TypeStripe
	h.Now = func() time.Time { return testNow }
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &bundle{
		t: t, pool: tdb.Pool, url: srv.URL + stripeHookPath, client: proctest.NewClient(srv.URL, ""),
		tenantID: testdb.Tenant(t, tdb.Pool, testdb.TenantOpts{Name: "stripe webhook tests"}).ID,
	}
}

// stripePayment seeds a payment at provider "stripe" in status; its
// PaymentIntent id is returned (recorded when the status records one).
func (b *bundle) stripePayment(status attempts.Status, method string) (testdb.Seeded, string) {
	b.t.Helper()
	pi := testkit.RandomID("pi_")
	return testdb.Attempt(b.t, b.pool, testdb.AttemptOpts{
		TenantID: b.tenantID, Status: status, ChargeID: pi, CaptureMethod: method, Provider: "stripe",
	}), pi
}

// piEvent is a Stripe event of typ about PaymentIntent pi of payment a.
func piEvent(typ string, a attempts.Attempt, pi string, fields map[string]any) map[string]any {
	obj := map[string]any{
		"id": pi, "object": "payment_intent", "amount": a.Amount, "currency": "usd",
		"capture_method": "automatic_async", "created": testNow.Unix(),
		"metadata": map[string]string{"psvc_payment": a.ID}, "latest_charge": "ch_x",
	}
	if a.Manual() {
		obj["capture_method"] = "manual"
	}
	for k, v := range fields {
		obj[k] = v
	}
	return map[string]any{
		"id": testkit.RandomID("evt_"), "object": "event", "api_version": "2025-08-27.basil",
		"created": testNow.Unix(), "type": typ, "data": map[string]any{"object": obj},
	}
}

func refundObjEvent(typ, refundID, pi, status string, amount int64, meta map[string]string) map[string]any {
	return map[string]any{
		"id": testkit.RandomID("evt_"), "object": "event", "api_version": "2025-08-27.basil",
		"created": testNow.Unix(), "type": typ, "data": map[string]any{"object": map[string]any{
			"id": refundID, "object": "refund", "amount": amount, "currency": "usd", "payment_intent": pi,
			"status": status, "metadata": meta, "created": testNow.Unix(),
		}},
	}
}

func evID(ev map[string]any) string { return ev["id"].(string) }

// stripeSign is a Stripe-Signature header: t and one v1 per secret.
func stripeSign(ts int64, body []byte, secrets ...string) string {
	h := "t=" + strconv.FormatInt(ts, 10)
	for _, s := range secrets {
		h += ",v1=" + hexMAC(s, ts, body)
	}
	return h
}

func hexMAC(secret string, ts int64, body []byte) string {
	s := sign(secret, ts, body) // "t=…,v1=HEX"
	return s[len("t=")+len(strconv.FormatInt(ts, 10))+len(",v1="):]
}

func (b *bundle) stripePost(body []byte, sig string) apiclient.Response {
	b.t.Helper()
	r, err := b.client.Do(http.MethodPost, stripeHookPath, body,
		map[string]string{"Content-Type": "application/json", HeaderStripeSignature: sig})
	require.NoError(b.t, err)
	return r
}

// stripeDeliver posts ev signed with testSecret now.
func (b *bundle) stripeDeliver(ev map[string]any) apiclient.Response {
	b.t.Helper()
	body, err := json.Marshal(ev)
	require.NoError(b.t, err)
	return b.stripePost(body, stripeSign(testNow.Unix(), body, testSecret))
}

func (b *bundle) stripeOutcome(eventID string) string {
	b.t.Helper()
	var o string
	err := b.pool.QueryRow(context.Background(),
		`SELECT outcome FROM webhook_events WHERE provider = 'stripe' AND event_id = $1`, eventID).Scan(&o)
	require.NoError(b.t, err, "read outcome of %s", eventID)
	return o
}

func TestStripeSignature(t *testing.T) {
	t.Parallel()
	b := stripeSetup(t, "whsec_old", "whsec_new")
	p, pi := b.stripePayment(attempts.Pending, attempts.CaptureAutomatic)
	ev := piEvent(StripePaymentIntentSucceeded, p.Attempt, pi, map[string]any{"status": "succeeded", "amount_received": p.Amount})
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	now := testNow.Unix()
	for _, tc := range []struct {
		name string
		sig  string
	}{
		{"missing", ""},
		{"wrong secret", stripeSign(now, body, "whsec_other")},
		{"stale", stripeSign(now-301, body, "whsec_new")},
		{"too far ahead", stripeSign(now+301, body, "whsec_new")},
		{"another body", stripeSign(now, append([]byte(" "), body...), "whsec_new")},
		{"no v1", "t=" + strconv.FormatInt(now, 10) + ",v0=" + hexMAC("whsec_new", now, body)},
	} {
		r := b.stripePost(body, tc.sig)
		require.Equal(t, http.StatusUnauthorized, r.Status, "%s: %s", tc.name, r)
	}
	// The simulator's header is not Stripe's.
	r, err := b.client.Do(http.MethodPost, stripeHookPath, body,
		map[string]string{"Content-Type": "application/json", HeaderSignature: stripeSign(now, body, "whsec_new")})
	require.NoError(t, err)
	require.Equal(t, http.StatusUnauthorized, r.Status)
	require.Zero(t, b.count(`SELECT count(*) FROM webhook_events`), "nothing stored for a refused signature")
	require.Equal(t, attempts.Pending, b.get(p.ID).Status)

	// Several v1 values (one of a secret we do not have) and either
	// configured secret verify, 300 s either side of now.
	expectOK(t, b.stripePost(body, stripeSign(now-300, body, "whsec_rolled", "whsec_old")))
	require.Equal(t, attempts.Succeeded, b.get(p.ID).Status)
	expectOK(t, b.stripePost(body, stripeSign(now+300, body, "whsec_new")))
	require.Equal(t, 1, b.count(`SELECT count(*) FROM webhook_events WHERE event_id = $1`, evID(ev)))
	require.Equal(t, 1, b.audits(p.ID, attempts.Succeeded), "applied once")
}

func TestStripeEventEffects(t *testing.T) {
	t.Parallel()
	b := stripeSetup(t)
	t.Run("succeeded", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		p, pi := b.stripePayment(attempts.Unknown, attempts.CaptureAutomatic)
		ev := piEvent(StripePaymentIntentSucceeded, p.Attempt, pi, map[string]any{"status": "succeeded", "amount_received": p.Amount})
		expectOK(t, b.stripeDeliver(ev))
		require.Equal(t, outcomeApplied, b.stripeOutcome(evID(ev)))
		a := b.get(p.ID)
		require.Equal(t, attempts.Succeeded, a.Status)
		require.Equal(t, pi, *a.ProviderChargeID)
		require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentSucceeded))
	})
	t.Run("found by metadata before the PaymentIntent id is recorded", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		p := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: attempts.Pending, Provider: "stripe"})
		pi := testkit.RandomID("pi_")
		ev := piEvent(StripePaymentIntentSucceeded, p.Attempt, pi, map[string]any{"status": "succeeded", "amount_received": p.Amount})
		expectOK(t, b.stripeDeliver(ev))
		a := b.get(p.ID)
		require.Equal(t, attempts.Succeeded, a.Status)
		require.Equal(t, pi, *a.ProviderChargeID, "the PaymentIntent id is the charge id")
	})
	t.Run("payment_failed", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		p, pi := b.stripePayment(attempts.Pending, attempts.CaptureAutomatic)
		ev := piEvent(StripePaymentIntentPaymentFailed, p.Attempt, pi, map[string]any{"status": "requires_payment_method",
			"last_payment_error": map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "insufficient_funds"}})
		expectOK(t, b.stripeDeliver(ev))
		a := b.get(p.ID)
		require.Equal(t, attempts.Failed, a.Status)
		require.Equal(t, "insufficient_funds", *a.FailureCode)
	})
	t.Run("amount_capturable_updated", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		p, pi := b.stripePayment(attempts.Unknown, attempts.CaptureManual)
		before := testNow.Add(7 * 24 * time.Hour).Unix()
		ev := piEvent(StripePaymentIntentCapturableUpdated, p.Attempt, pi, map[string]any{"status": "requires_capture",
			"amount_capturable": p.Amount, "latest_charge": map[string]any{"id": "ch_1", "object": "charge",
				"payment_method_details": map[string]any{"card": map[string]any{"capture_before": before}}}})
		expectOK(t, b.stripeDeliver(ev))
		a := b.get(p.ID)
		require.Equal(t, attempts.Authorized, a.Status)
		require.Equal(t, time.Unix(before, 0).UTC(), a.CaptureBefore.UTC())
	})
	t.Run("succeeded by our capture", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		p, pi := b.stripePayment(attempts.Authorized, attempts.CaptureManual)
		c := testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: p, Status: lifecycle.Unknown})
		ev := piEvent(StripePaymentIntentSucceeded, p.Attempt, pi, map[string]any{"status": "succeeded", "amount_received": 300})
		expectOK(t, b.stripeDeliver(ev))
		got, err := captures.Get(context.Background(), b.pool, c.ID)
		require.NoError(t, err)
		require.Equal(t, lifecycle.Succeeded, got.Status)
		a := b.get(p.ID)
		require.Equal(t, attempts.Succeeded, a.Status)
		require.EqualValues(t, 300, a.AmountCaptured)
		require.Zero(t, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1`, p.ID))
	})
	for _, tc := range []struct {
		name, cancellation, ours, want, anomaly string
	}{
		{"canceled automatic is an expiry", "automatic", "", lifecycle.CanceledExpired, ""},
		{"canceled by our void", "requested_by_customer", "duplicate", "duplicate", ""},
		{"canceled at the provider", "abandoned", "", lifecycle.CanceledAtProvider, attempts.AnomalyUnexpectedVoid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := b.with(t)
			p, pi := b.stripePayment(attempts.Authorized, attempts.CaptureManual)
			if tc.ours != "" {
				reason := tc.ours
				testdb.Capture(t, b.pool, testdb.CaptureOpts{Payment: p, Kind: captures.KindVoid, Reason: &reason, Status: lifecycle.Pending})
			}
			ev := piEvent(StripePaymentIntentCanceled, p.Attempt, pi, map[string]any{"status": "canceled", "cancellation_reason": tc.cancellation})
			expectOK(t, b.stripeDeliver(ev))
			a := b.get(p.ID)
			require.Equal(t, attempts.Canceled, a.Status)
			require.Equal(t, tc.want, *a.CanceledReason)
			want := 0
			if tc.anomaly != "" {
				want = 1
			}
			require.Equal(t, want, b.count(`SELECT count(*) FROM anomalies WHERE attempt_id = $1`, p.ID))
		})
	}
}

// stripeRefund seeds a PENDING refund of SUCCEEDED payment p.
func (b *bundle) stripeRefund(p testdb.Seeded, amount int64) refunds.Refund {
	b.t.Helper()
	ctx := context.Background()
	var r refunds.Refund
	err := db.WithTx(ctx, b.pool, func(tx pgx.Tx) error {
		var err error
		r, _, err = refunds.Create(ctx, tx, refunds.New{
			ID: refunds.NewID(), TenantID: b.tenantID, PaymentID: p.ID, IdempotencyKey: testkit.RandomID("key-"), Amount: &amount,
		})
		if err != nil {
			return err
		}
		r, _, err = refunds.Transition(ctx, tx, refunds.Change{ID: r.ID, To: lifecycle.Pending, Source: lifecycle.SourceAPI, Reason: "test"})
		return err
	})
	require.NoError(b.t, err)
	return r
}

func (b *bundle) refund(id string) refunds.Refund {
	b.t.Helper()
	r, err := refunds.Get(context.Background(), b.pool, id)
	require.NoError(b.t, err)
	return r
}

func TestStripeRefundEvents(t *testing.T) {
	t.Parallel()
	b := stripeSetup(t)
	t.Run("refund.created succeeded, before the payment's own event", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		p, pi := b.stripePayment(attempts.Succeeded, attempts.CaptureAutomatic)
		r := b.stripeRefund(p, 200)
		reID := testkit.RandomID("re_")
		ev := refundObjEvent(StripeRefundCreated, reID, pi, "succeeded", 200, map[string]string{"psvc_refund": r.ID})
		expectOK(t, b.stripeDeliver(ev))
		require.Equal(t, outcomeApplied, b.stripeOutcome(evID(ev)))
		got := b.refund(r.ID)
		require.Equal(t, lifecycle.Succeeded, got.Status)
		require.Equal(t, reID, *got.ProviderRefundID)
		require.EqualValues(t, 200, b.get(p.ID).AmountRefunded)
		// The payment's succeeded event, late: nothing moves.
		late := piEvent(StripePaymentIntentSucceeded, p.Attempt, pi, map[string]any{"status": "succeeded", "amount_received": p.Amount})
		expectOK(t, b.stripeDeliver(late))
		require.Equal(t, outcomeNoop, b.stripeOutcome(evID(late)))
		require.Equal(t, attempts.Succeeded, b.get(p.ID).Status)
		// refund.updated and charge.refund.updated about it again: no-ops.
		for _, typ := range []string{StripeRefundUpdated, StripeChargeRefundUpdated} {
			again := refundObjEvent(typ, reID, pi, "succeeded", 200, map[string]string{"psvc_refund": r.ID})
			expectOK(t, b.stripeDeliver(again))
			require.Equal(t, outcomeNoop, b.stripeOutcome(evID(again)))
		}
		require.EqualValues(t, 200, b.get(p.ID).AmountRefunded, "refunded once")
	})
	t.Run("found by the refund id without metadata", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		p, pi := b.stripePayment(attempts.Succeeded, attempts.CaptureAutomatic)
		r := b.stripeRefund(p, 100)
		reID := testkit.RandomID("re_")
		_, err := b.pool.Exec(context.Background(), `UPDATE refunds SET provider_refund_id = $1 WHERE id = $2`, reID, r.ID)
		require.NoError(t, err)
		expectOK(t, b.stripeDeliver(refundObjEvent(StripeRefundUpdated, reID, pi, "succeeded", 100, nil)))
		require.Equal(t, lifecycle.Succeeded, b.refund(r.ID).Status)
	})
	t.Run("pending changes nothing, failed fails", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		p, pi := b.stripePayment(attempts.Succeeded, attempts.CaptureAutomatic)
		r := b.stripeRefund(p, 150)
		reID := testkit.RandomID("re_")
		pending := refundObjEvent(StripeRefundCreated, reID, pi, "pending", 150, map[string]string{"psvc_refund": r.ID})
		expectOK(t, b.stripeDeliver(pending))
		require.Zero(t, b.webhookEvents(evID(pending)), "nothing recorded")
		require.Equal(t, lifecycle.Pending, b.refund(r.ID).Status)
		failed := refundObjEvent(StripeRefundFailed, reID, pi, "failed", 150, map[string]string{"psvc_refund": r.ID})
		failed["data"].(map[string]any)["object"].(map[string]any)["failure_reason"] = "expired_or_canceled_card"
		expectOK(t, b.stripeDeliver(failed))
		got := b.refund(r.ID)
		require.Equal(t, lifecycle.Failed, got.Status)
		require.Equal(t, "expired_or_canceled_card", *got.FailureCode)
		require.Zero(t, b.get(p.ID).AmountRefunded)
	})
	t.Run("charge.refunded", func(t *testing.T) {
		t.Parallel()
		b := b.with(t)
		p, pi := b.stripePayment(attempts.Succeeded, attempts.CaptureAutomatic)
		ev := map[string]any{"id": testkit.RandomID("evt_"), "object": "event", "type": StripeChargeRefunded,
			"data": map[string]any{"object": map[string]any{"id": "ch_1", "object": "charge", "payment_intent": pi,
				"refunded": true, "metadata": map[string]string{"psvc_payment": p.ID}}}}
		expectOK(t, b.stripeDeliver(ev))
		require.Equal(t, outcomeNoop, b.stripeOutcome(evID(ev)))
	})
}

func TestStripeDuplicatesAndOutOfOrder(t *testing.T) {
	t.Parallel()
	b := stripeSetup(t)
	p, pi := b.stripePayment(attempts.Pending, attempts.CaptureAutomatic)
	ev := piEvent(StripePaymentIntentSucceeded, p.Attempt, pi, map[string]any{"status": "succeeded", "amount_received": p.Amount})
	for range 3 {
		expectOK(t, b.stripeDeliver(ev))
	}
	require.Equal(t, 1, b.webhookEvents(evID(ev)))
	require.Equal(t, 1, b.audits(p.ID, attempts.Succeeded))
	require.Equal(t, 1, b.events(p.ID, attempts.EventPaymentSucceeded))

	// A failure reported after the success contradicts it: an anomaly,
	// once however often it comes.
	failed := piEvent(StripePaymentIntentPaymentFailed, p.Attempt, pi, map[string]any{"status": "requires_payment_method",
		"last_payment_error": map[string]any{"code": "card_declined"}})
	expectOK(t, b.stripeDeliver(failed))
	expectOK(t, b.stripeDeliver(failed))
	require.Equal(t, outcomeAnomaly, b.stripeOutcome(evID(failed)))
	require.Equal(t, 1, b.anomalies(anomalyConflictingReport, pi))
	require.Equal(t, attempts.Succeeded, b.get(p.ID).Status)

	// A manual payment voided, then its authorization's event late.
	m, mpi := b.stripePayment(attempts.Authorized, attempts.CaptureManual)
	expectOK(t, b.stripeDeliver(piEvent(StripePaymentIntentCanceled, m.Attempt, mpi, map[string]any{"status": "canceled", "cancellation_reason": "automatic"})))
	late := piEvent(StripePaymentIntentCapturableUpdated, m.Attempt, mpi, map[string]any{"status": "requires_capture"})
	expectOK(t, b.stripeDeliver(late))
	require.Equal(t, outcomeNoop, b.stripeOutcome(evID(late)))
	require.Equal(t, attempts.Canceled, b.get(m.ID).Status)
}

func TestStripeOtherTypesAndMalformedBodies(t *testing.T) {
	t.Parallel()
	b := stripeSetup(t)
	// Types we do not apply, with or without an object: 200, nothing stored.
	for _, ev := range []map[string]any{
		{"id": "evt_a", "object": "event", "type": "customer.created", "data": map[string]any{"object": map[string]any{"id": "cus_1"}}},
		{"id": "evt_b", "object": "event", "type": "payment_intent.processing"},
	} {
		expectOK(t, b.stripeDeliver(ev))
	}
	require.Zero(t, b.count(`SELECT count(*) FROM webhook_events`))

	for _, body := range []string{
		`not json`,
		`{"id":"evt_c","type":"payment_intent.succeeded","data":{"object":{"status":"succeeded"}}}`,
		`{"id":"evt_d","type":"refund.created","data":{}}`,
		`{"type":"payment_intent.succeeded","data":{"object":{"id":"pi_1"}}}`,
	} {
		r := b.stripePost([]byte(body), stripeSign(testNow.Unix(), []byte(body), testSecret))
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", body, r)
	}
	require.Zero(t, b.count(`SELECT count(*) FROM webhook_events`))

	// A PaymentIntent of another system on a shared account (no
	// metadata[psvc_payment], no payment of ours): recorded, no anomaly;
	// one with our metadata but no payment is an anomaly.
	foreign := piEvent(StripePaymentIntentSucceeded, attempts.Attempt{Amount: 100}, testkit.RandomID("pi_"), map[string]any{"status": "succeeded", "metadata": map[string]string{"order": "x"}})
	expectOK(t, b.stripeDeliver(foreign))
	require.Equal(t, outcomeNoop, b.stripeOutcome(evID(foreign)))
	ours := piEvent(StripePaymentIntentSucceeded, attempts.Attempt{ID: "pay_gone", Amount: 100}, testkit.RandomID("pi_"), map[string]any{"status": "succeeded"})
	expectOK(t, b.stripeDeliver(ours))
	require.Equal(t, outcomeUnknownCharge, b.stripeOutcome(evID(ours)))
	require.Equal(t, 1, b.allAnomalies())

	// Another api_version, with fields we do not know: accepted on the
	// fields used.
	p, pi := b.stripePayment(attempts.Pending, attempts.CaptureAutomatic)
	ev := piEvent(StripePaymentIntentSucceeded, p.Attempt, pi, map[string]any{"status": "succeeded", "amount_received": p.Amount,
		"some_future_field": map[string]any{"x": 1}})
	ev["api_version"] = "2019-02-19"
	expectOK(t, b.stripeDeliver(ev))
	require.Equal(t, attempts.Succeeded, b.get(p.ID).Status)
}

// TestStripeFaceEventsApply: the simulator's Stripe face and this handler
// agree: its signed events, for PaymentIntents made through stripe-go,
// move our payments (a real HTTP delivery, real clocks).
func TestStripeFaceEventsApply(t *testing.T) {
	t.Parallel()
	tdb := testdb.New(t)
	h := NewHandler(tdb.Pool, "stripe", []string{"whsec_face"}, slog.New(slog.DiscardHandler))
	h.Type = settings.TypeStripe
	hooks := httptest.NewServer(h)
	t.Cleanup(hooks.Close)
	sim := proctest.ServeSim(t, providersim.Config{API: providersim.APIStripe, APIKey: "sk_face",
		WebhookURL: hooks.URL + stripeHookPath, WebhookSecret: "whsec_face"}, nil)
	sc := stripe.NewClient("sk_face", stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
		URL: stripe.String(sim.URL()), MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	})))
	b := &bundle{t: t, pool: tdb.Pool, tenantID: testdb.Tenant(t, tdb.Pool, testdb.TenantOpts{Name: "face"}).ID}

	auto := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: attempts.Pending, Provider: "stripe"})
	man := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: attempts.Pending, Provider: "stripe", CaptureMethod: attempts.CaptureManual})
	declined := testdb.Attempt(t, b.pool, testdb.AttemptOpts{TenantID: b.tenantID, Status: attempts.Pending, Provider: "stripe"})
	create := func(a testdb.Seeded, pm, method string) string {
		p := &stripe.PaymentIntentCreateParams{Amount: stripe.Int64(a.Amount), Currency: stripe.String("usd"),
			PaymentMethod: stripe.String(pm), Confirm: stripe.Bool(true), OffSession: stripe.Bool(true),
			CaptureMethod: stripe.String(method), Metadata: map[string]string{"psvc_payment": a.ID}}
		p.SetIdempotencyKey("psvc_" + a.ID)
		pi, err := sc.V1PaymentIntents.Create(context.Background(), p)
		if pm == "pm_card_chargeDeclined" {
			var se *stripe.Error
			require.ErrorAs(t, err, &se)
			return se.PaymentIntent.ID
		}
		require.NoError(t, err)
		return pi.ID
	}
	autoPI := create(auto, "pm_card_visa", "automatic")
	manPI := create(man, "pm_card_visa", "manual")
	declinedPI := create(declined, "pm_card_chargeDeclined", "automatic")

	testkit.Eventually(t, 10*time.Second, "the three payments moved by the face's webhooks", func() bool {
		return b.get(auto.ID).Status == attempts.Succeeded && b.get(man.ID).Status == attempts.Authorized &&
			b.get(declined.ID).Status == attempts.Failed
	})
	require.Equal(t, autoPI, *b.get(auto.ID).ProviderChargeID)
	require.Equal(t, manPI, *b.get(man.ID).ProviderChargeID)
	// Stripe's events carry latest_charge as an id, so the deadline is
	// not known from the event (the connector reads it).
	require.Nil(t, b.get(man.ID).CaptureBefore)
	require.Equal(t, declinedPI, *b.get(declined.ID).ProviderChargeID)
	require.Equal(t, "generic_decline", *b.get(declined.ID).FailureCode)
	require.Zero(t, b.allAnomalies())
}
