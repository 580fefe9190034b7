package providersim

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acme/paymentsvc/internal/testkit"
)

// authorize makes a charge with "capture":false under key.
func (b *bundle) authorize(key string, amount int64) Charge {
	b.t.Helper()
	body := chargeBody(amount, "pm_card_visa")
	body["capture"] = false
	r := b.do(http.MethodPost, "/v1/charges", key, body)
	equal(b.t, r.status, http.StatusCreated, "authorize status")
	return decode[Charge](b.t, r)
}

// capture captures amount (0: all) of charge id under key.
func (b *bundle) capture(key, id string, amount int64) reply {
	b.t.Helper()
	body := map[string]any{"reference": "cap_test"}
	if amount > 0 {
		body["amount"] = amount
	}
	return b.do(http.MethodPost, "/v1/charges/"+id+"/capture", key, body)
}

// void voids charge id under key.
func (b *bundle) void(key, id string) reply {
	b.t.Helper()
	return b.do(http.MethodPost, "/v1/charges/"+id+"/void", key, map[string]any{"reference": "void_test"})
}

func TestAuthorizeThenCapturePart(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{AuthTTL: time.Hour})
	before := time.Now().Unix()
	ch := b.authorize("k-auth", 1000)
	equal(t, ch.Status, StatusAuthorized, "status")
	equal(t, ch.Captured, false, "captured")
	equal(t, ch.AmountCaptured, int64(0), "amount_captured")
	equal(t, ch.AmountCapturable, int64(1000), "amount_capturable")
	if ch.CaptureBefore < before+3599 || ch.CaptureBefore > time.Now().Unix()+3600 {
		t.Fatalf("capture_before %d is not created + SIM_AUTH_TTL", ch.CaptureBefore)
	}
	// An authorized charge moved no money: it is not refundable.
	wantRefused(t, b.refund("k-early-refund", ch.ID), 400, codeChargeNotRefundable, "refund of an authorization")

	r := b.capture("k-cap", ch.ID, 600)
	equal(t, r.status, http.StatusOK, "capture status")
	got := decode[Charge](t, r)
	equal(t, got.Status, StatusSucceeded, "captured status")
	equal(t, got.Captured, true, "captured")
	equal(t, got.AmountCaptured, int64(600), "amount_captured")
	equal(t, got.AmountCapturable, int64(0), "amount_capturable after a partial capture")
	equal(t, *got.CaptureKey, "k-cap", "capture_key")
	for _, field := range []string{`"captured":true`, `"amount_captured":600`, `"capture_key":"k-cap"`, `"void_key":null`} {
		if !strings.Contains(string(r.body), field) {
			t.Fatalf("capture answer %s lacks %s", r.body, field)
		}
	}

	again := b.capture("k-cap", ch.ID, 600)
	equal(t, again.status, http.StatusOK, "replay status")
	equal(t, again.header.Get("Idempotent-Replayed"), "true", "replay header")
	equal(t, string(again.body), string(r.body), "replayed body")
	wantRefused(t, b.capture("k-cap", ch.ID, 0), 400, codeIdempotencyError, "same key, other body")
	wantRefused(t, b.capture("k-cap-2", ch.ID, 100), 400, codeChargeAlreadyCaptured, "a second capture")
	wantRefused(t, b.void("k-void", ch.ID), 400, codeChargeAlreadyCaptured, "a void of a captured charge")

	// Refunds are limited to what was captured.
	wantRefused(t, b.refundPart("k-rf-big", ch.ID, 700), 400, codeAmountTooLarge, "refund beyond amount_captured")
	rf := b.refund("k-rf", ch.ID)
	equal(t, rf.status, http.StatusCreated, "refund of the rest")
	equal(t, decode[Refund](t, rf).Amount, int64(600), "the rest is amount_captured")
	equal(t, b.simCharge(ch.ID).Refunded, true, "refunded once amount_captured is refunded")

	equal(t, b.stats(), Stats{ChargeCalls: 1, Charges: 1, RefundCalls: 3, Refunds: 1, CaptureCalls: 4, VoidCalls: 1}, "stats")
}

func TestVoidReleasesTheAuthorization(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ch := b.authorize("k-auth", 500)
	r := b.void("k-void", ch.ID)
	equal(t, r.status, http.StatusOK, "void status")
	got := decode[Charge](t, r)
	equal(t, got.Status, StatusVoided, "voided")
	equal(t, got.AmountCapturable, int64(0), "amount_capturable")
	equal(t, *got.VoidKey, "k-void", "void_key")
	equal(t, got.CaptureKey == nil, true, "capture_key")

	again := b.void("k-void", ch.ID)
	equal(t, again.header.Get("Idempotent-Replayed"), "true", "replay header")
	equal(t, string(again.body), string(r.body), "replayed body")
	wantRefused(t, b.void("k-void-2", ch.ID), 400, codeChargeNotCapturable, "a second void")
	wantRefused(t, b.capture("k-cap", ch.ID, 0), 400, codeChargeNotCapturable, "a capture of a voided charge")
	wantRefused(t, b.refund("k-rf", ch.ID), 400, codeChargeNotRefundable, "a refund of a voided charge")
}

func TestCaptureRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	auto := decode[Charge](t, b.charge("k-auto", 500, "pm_card_visa"))
	equal(t, auto.Captured, true, "an automatic charge is captured")
	equal(t, auto.AmountCaptured, int64(500), "amount_captured of an automatic charge")
	wantRefused(t, b.capture("k-1", auto.ID, 0), 400, codeChargeNotCapturable, "capture of an automatic charge")
	wantRefused(t, b.void("k-2", auto.ID), 400, codeChargeNotCapturable, "void of an automatic charge")
	wantRefused(t, b.capture("k-3", "ch_nope", 0), 404, codeResourceMissing, "capture of an unknown charge")

	ch := b.authorize("k-auth", 500)
	wantRefused(t, b.capture("k-4", ch.ID, 501), 400, codeAmountTooLarge, "more than held")
	// A refusal is not stored: the same key captures once the cause is gone.
	r := b.capture("k-4", ch.ID, 500)
	equal(t, r.status, http.StatusOK, "the same key after a refusal")
	wantRefused(t, b.do(http.MethodPost, "/v1/charges/"+ch.ID+"/void", "k-5", `{"amount":1}`), 400, codeInvalidRequest, "a void with an amount")
	wantRefused(t, b.do(http.MethodPost, "/v1/charges/"+ch.ID+"/capture", "k-6", `{"amount":0}`), 400, codeInvalidRequest, "amount 0")
	wantRefused(t, b.do(http.MethodPost, "/v1/charges/"+ch.ID+"/capture", "", `{}`), 400, codeIdempotencyKeyMissing, "no key")

	declined := b.do(http.MethodPost, "/v1/charges", "k-declined", map[string]any{
		"amount": 500, "currency": "USD", "payment_method": declinedPaymentMethod, "reference": "pay_x", "capture": false,
	})
	equal(t, declined.status, http.StatusPaymentRequired, "a declined authorization")
	failed := decode[struct{ Charge Charge }](t, declined).Charge
	wantRefused(t, b.capture("k-7", failed.ID, 0), 400, codeChargeNotCapturable, "capture of a failed charge")
}

func TestAuthorizationKeyCoversCapture(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.authorize("k-auth", 500)
	// "capture":true and no capture field are the same request; false is another.
	wantRefused(t, b.charge("k-auth", 500, "pm_card_visa"), 400, codeIdempotencyError, "the key with capture omitted")
	b.charge("k-auto", 500, "pm_card_visa")
	body := chargeBody(500, "pm_card_visa")
	body["capture"] = true
	r := b.do(http.MethodPost, "/v1/charges", "k-auto", body)
	equal(t, r.header.Get("Idempotent-Replayed"), "true", "capture:true replays the automatic charge")
}

func TestAuthorizationExpires(t *testing.T) {
	t.Parallel()
	rc, url := newReceiver(t, 0)
	c := testkit.NewClock(time.Now())
	b := setup(t, Config{AuthTTL: time.Minute, WebhookURL: url, WebhookSecret: testWebhookSecret, now: c.Now})
	ch := b.authorize("k-auth", 500)
	other := b.authorize("k-other", 700)

	c.Add(59 * time.Second)
	equal(t, decode[Charge](t, b.do(http.MethodGet, "/v1/charges/"+ch.ID, "", nil)).Status, StatusAuthorized, "before capture_before")
	c.Add(time.Second)
	// Expired when next read, whichever read that is.
	got := decode[Charge](t, b.do(http.MethodGet, "/v1/charges?idempotency_key=k-auth", "", nil))
	equal(t, got.Status, StatusExpired, "at capture_before")
	equal(t, got.AmountCapturable, int64(0), "amount_capturable")
	wantRefused(t, b.capture("k-cap", ch.ID, 0), 400, codeAuthorizationExpired, "capture after expiry")
	wantRefused(t, b.void("k-void", other.ID), 400, codeAuthorizationExpired, "void after expiry")

	eventually(t, "charge.expired for both", func() bool { return countEvents(rc, EventChargeExpired) == 2 })
	eventually(t, "charge.authorized for both", func() bool { return countEvents(rc, EventChargeAuthorized) == 2 })
	equal(t, countEvents(rc, EventChargeSucceeded), 0, "an authorization sends no charge.succeeded")
}

func TestExpireControl(t *testing.T) {
	t.Parallel()
	rc, url := newReceiver(t, 0)
	b := setup(t, Config{WebhookURL: url, WebhookSecret: testWebhookSecret})
	ch := b.authorize("k-auth", 500)
	expire := func(id string) reply {
		return send(t, b.client, b.request(http.MethodPost, "/_sim/charges/"+id+"/expire", "", nil, false))
	}
	r := expire(ch.ID)
	equal(t, r.status, http.StatusOK, "expire status")
	equal(t, decode[Charge](t, r).Status, StatusExpired, "expired")
	equal(t, expire(ch.ID).status, http.StatusOK, "expiring an expired charge again")
	wantRefused(t, expire("ch_nope"), 404, codeResourceMissing, "an unknown charge")
	auto := decode[Charge](t, b.charge("k-auto", 500, "pm_card_visa"))
	wantRefused(t, expire(auto.ID), 400, codeChargeNotCapturable, "an automatic charge")
	wantRefused(t, b.capture("k-cap", ch.ID, 0), 400, codeAuthorizationExpired, "capture after expiry")
	eventually(t, "three webhooks", func() bool { return len(rc.got()) == 3 })
	equal(t, countEvents(rc, EventChargeExpired), 1, "charge.expired once")
}

func TestCaptureAndVoidLookups(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	a := b.authorize("k-a", 500)
	v := b.authorize("k-v", 500)
	b.capture("k-cap", a.ID, 300)
	b.void("k-void", v.ID)

	r := b.do(http.MethodGet, "/v1/captures?idempotency_key=k-cap", "", nil)
	equal(t, r.status, http.StatusOK, "capture lookup")
	got := decode[Capture](t, r)
	equal(t, got, Capture{Charge: a.ID, Amount: 300, Reference: "cap_test", IdempotencyKey: "k-cap", Created: got.Created}, "capture")
	r = b.do(http.MethodGet, "/v1/voids?idempotency_key=k-void", "", nil)
	equal(t, r.status, http.StatusOK, "void lookup")
	if strings.Contains(string(r.body), `"amount"`) {
		t.Fatalf("a void has no amount: %s", r.body)
	}
	equal(t, decode[Capture](t, r).Charge, v.ID, "void's charge")
	wantRefused(t, b.do(http.MethodGet, "/v1/captures?idempotency_key=k-void", "", nil), 404, codeResourceMissing, "a void is no capture")
	wantRefused(t, b.do(http.MethodGet, "/v1/voids?idempotency_key=nope", "", nil), 404, codeResourceMissing, "unknown key")
	wantRefused(t, b.do(http.MethodGet, "/v1/captures", "", nil), 400, codeInvalidRequest, "no key")
}

func TestCaptureFaultsOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ch := b.authorize("k-auth", 500)
	b.setFaults(Faults{ErrorRate: 1, ErrorStatus: 503})
	equal(t, b.capture("k-cap", ch.ID, 100).status, http.StatusOK, "captures are not faulted without captures:true")

	ch2 := b.setupAuthorized("k-auth-2")
	b.setFaults(Faults{ErrorRate: 1, ErrorStatus: 503, Captures: true})
	wantRefused(t, b.capture("k-cap-2", ch2.ID, 0), 503, codeSimulatedFault, "a faulted capture")
	wantRefused(t, b.void("k-void-2", ch2.ID), 503, codeSimulatedFault, "a faulted void")
	equal(t, b.simCharge(ch2.ID).Status, StatusAuthorized, "nothing happened")

	b.setFaults(Faults{DropAfterCommit: true, Captures: true})
	// A fresh connection: net/http retries a request with an Idempotency-Key
	// whose reused connection closes, which would be a second call.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if _, err := roundTrip(fresh, b.request(http.MethodPost, "/v1/charges/"+ch2.ID+"/capture", "k-cap-3", map[string]any{}, true)); err == nil {
		t.Fatal("the answer should have been dropped")
	}
	equal(t, b.simCharge(ch2.ID).Status, StatusSucceeded, "captured although the answer was lost")
	b.setFaults(Faults{})
	again := b.do(http.MethodPost, "/v1/charges/"+ch2.ID+"/capture", "k-cap-3", map[string]any{})
	equal(t, again.header.Get("Idempotent-Replayed"), "true", "the retry replays")
	equal(t, b.stats().CaptureCalls, int64(4), "capture_calls")
	equal(t, b.stats().VoidCalls, int64(1), "void_calls")
}

// setupAuthorized is authorize, with the faults cleared first.
func (b *bundle) setupAuthorized(key string) Charge {
	b.t.Helper()
	b.setFaults(Faults{})
	return b.authorize(key, 500)
}

// TestCaptureRacesVoid: of a capture and a void of one charge released
// together, exactly one wins, every round.
func TestCaptureRacesVoid(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for i := range 20 {
		ch := b.authorize(fmt.Sprintf("k-auth-%d", i), 500)
		replies := b.sendTogether(2, func(j int) *http.Request {
			if j == 0 {
				return b.request(http.MethodPost, "/v1/charges/"+ch.ID+"/capture", fmt.Sprintf("k-cap-%d", i), map[string]any{}, true)
			}
			return b.request(http.MethodPost, "/v1/charges/"+ch.ID+"/void", fmt.Sprintf("k-void-%d", i), map[string]any{}, true)
		})
		won := 0
		for _, r := range replies {
			if r.status == http.StatusOK {
				won++
			}
		}
		equal(t, won, 1, fmt.Sprintf("round %d winners", i))
		got := b.simCharge(ch.ID)
		equal(t, (got.CaptureKey == nil) != (got.VoidKey == nil), true, fmt.Sprintf("round %d: captured or voided, not both", i))
	}
}

func TestCapturesSurviveRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.json")
	b := setup(t, Config{StateFile: file})
	a := b.authorize("k-a", 500)
	held := b.authorize("k-held", 500)
	b.capture("k-cap", a.ID, 200)
	b.void("k-void", b.authorize("k-v", 500).ID)

	b2 := setup(t, Config{StateFile: file, AuthTTL: time.Second})
	got := b2.capture("k-cap", a.ID, 200)
	equal(t, got.header.Get("Idempotent-Replayed"), "true", "the capture's key survives")
	equal(t, decode[Charge](t, got).AmountCaptured, int64(200), "amount_captured")
	equal(t, b2.void("k-void", "ch_other").status, http.StatusBadRequest, "the void's key keeps its request")
	equal(t, b2.do(http.MethodGet, "/v1/voids?idempotency_key=k-void", "", nil).status, http.StatusOK, "the void survives")
	// Still held after the restart, and capturable.
	equal(t, b2.capture("k-cap-held", held.ID, 0).status, http.StatusOK, "the held charge survives")
	st := b2.stats()
	equal(t, st.CaptureCalls, int64(3), "capture_calls survive")
	equal(t, st.VoidCalls, int64(2), "void_calls survive")
}

func countEvents(rc *receiver, typ string) int {
	n := 0
	for _, d := range rc.got() {
		if d.event.Type == typ {
			n++
		}
	}
	return n
}
