package providersim

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

var refundIDPattern = regexp.MustCompile(`^re_[0-9a-f]{24}$`)

// refund refunds the whole unrefunded rest of chargeID under key.
func (b *bundle) refund(key, chargeID string) reply {
	b.t.Helper()
	return b.do(http.MethodPost, "/v1/refunds", key, map[string]string{"charge": chargeID})
}

// refundPart refunds amount of chargeID under key, with a reference.
func (b *bundle) refundPart(key, chargeID string, amount int64) reply {
	b.t.Helper()
	return b.do(http.MethodPost, "/v1/refunds", key, refundBody(chargeID, amount))
}

func refundBody(chargeID string, amount int64) map[string]any {
	return map[string]any{"charge": chargeID, "amount": amount, "reference": "rfd_test"}
}

func (b *bundle) refunds() []Refund {
	b.t.Helper()
	r := send(b.t, b.client, b.request(http.MethodGet, "/_sim/refunds", "", nil, false))
	equal(b.t, r.status, http.StatusOK, "GET /_sim/refunds status")
	return decode[struct{ Data []Refund }](b.t, r).Data
}

// simCharge is the charge id as GET /_sim/charges shows it.
func (b *bundle) simCharge(id string) Charge {
	b.t.Helper()
	for _, c := range b.charges() {
		if c.ID == id {
			return c
		}
	}
	b.t.Fatalf("charge %s is not in GET /_sim/charges", id)
	return Charge{}
}

// wantRefused checks an error answer's status and code.
func wantRefused(t *testing.T, r reply, status int, code, what string) {
	t.Helper()
	equal(t, r.status, status, what+" status")
	equal(t, errorCode(t, r), code, what+" code")
}

func TestRefund(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ch := decode[Charge](t, b.charge("k-charge", 500, "pm_card_visa"))
	before := time.Now().Unix()

	r := b.do(http.MethodPost, "/v1/refunds", "k-refund", `{"charge":"`+ch.ID+`","reference":"rfd_1"}`)

	equal(t, r.status, http.StatusCreated, "status")
	equal(t, r.header.Get("Idempotent-Replayed"), "", "replay header")
	re := decode[Refund](t, r)
	if !refundIDPattern.MatchString(re.ID) {
		t.Fatalf("refund id %q does not match %v", re.ID, refundIDPattern)
	}
	if re.Created < before || re.Created > time.Now().Unix() {
		t.Fatalf("created %d is not now", re.Created)
	}
	equal(t, re, Refund{ID: re.ID, Charge: ch.ID, Amount: 500, Currency: "USD", Status: StatusSucceeded,
		Reference: "rfd_1", IdempotencyKey: "k-refund", Created: re.Created}, "refund")
	// The exact field names of the provider API, which clients read.
	for _, field := range []string{`"id":`, `"charge":`, `"amount":500`, `"status":"succeeded"`, `"reference":"rfd_1"`, `"idempotency_key":"k-refund"`, `"created":`} {
		if !strings.Contains(string(r.body), field) {
			t.Fatalf("refund body %s lacks %s", r.body, field)
		}
	}

	refunded := decode[Charge](t, b.do(http.MethodGet, "/v1/charges?idempotency_key=k-charge", "", nil))
	equal(t, refunded.AmountRefunded, 500, "charge amount_refunded")
	equal(t, refunded.Refunded, true, "charge refunded")
	equal(t, b.simCharge(ch.ID), refunded, "charge in GET /_sim/charges")
	equal(t, len(b.refunds()), 1, "refunds in GET /_sim/refunds")
	equal(t, b.refunds()[0], re, "refund in GET /_sim/refunds")

	// A refund of a fully refunded charge: amount_too_large, with or without an amount.
	wantRefused(t, b.refund("k-refund-2", ch.ID), http.StatusBadRequest, "amount_too_large", "second whole refund")
	wantRefused(t, b.refundPart("k-refund-3", ch.ID, 1), http.StatusBadRequest, "amount_too_large", "second partial refund")

	equal(t, b.stats(), Stats{ChargeCalls: 1, Charges: 1, RefundCalls: 3, Refunds: 1}, "stats")
}

func TestRefundReplayAndKeyReuse(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ch := decode[Charge](t, b.charge("k-charge", 1000, "pm_card_visa"))
	other := decode[Charge](t, b.charge("k-other", 1000, "pm_card_visa"))
	first := b.refundPart("k-refund", ch.ID, 400)
	equal(t, first.status, http.StatusCreated, "first status")

	// Same parameters in another key order and spacing: the same request.
	again := b.do(http.MethodPost, "/v1/refunds", "k-refund",
		`{ "reference":"rfd_test", "amount":400, "charge":"`+ch.ID+`" }`)
	equal(t, again.status, http.StatusCreated, "replay status")
	equal(t, again.header.Get("Idempotent-Replayed"), "true", "replay header")
	equal(t, string(again.body), string(first.body), "replay body")

	for name, body := range map[string]any{
		"another charge":    refundBody(other.ID, 400),
		"another amount":    refundBody(ch.ID, 300),
		"another reference": map[string]any{"charge": ch.ID, "amount": 400, "reference": "rfd_other"},
		"amount omitted":    map[string]any{"charge": ch.ID, "reference": "rfd_test"},
	} {
		wantRefused(t, b.do(http.MethodPost, "/v1/refunds", "k-refund", body), http.StatusBadRequest, "idempotency_error", name)
	}
	// An omitted amount is remembered as omitted: the same body replays even
	// though the rest has changed since.
	whole := b.refund("k-whole", other.ID)
	equal(t, whole.status, http.StatusCreated, "whole refund status")
	wholeAgain := b.refund("k-whole", other.ID)
	equal(t, wholeAgain.header.Get("Idempotent-Replayed"), "true", "whole refund replay header")
	equal(t, string(wholeAgain.body), string(whole.body), "whole refund replay body")
	wantRefused(t, b.refundPart("k-whole", other.ID, 1000), http.StatusBadRequest, "idempotency_error", "explicit amount for an omitted one")

	equal(t, b.simCharge(ch.ID).AmountRefunded, 400, "amount_refunded after replays")
	equal(t, b.stats(), Stats{ChargeCalls: 2, Charges: 2, RefundCalls: 9, Refunds: 2}, "stats")
}

func TestPartialRefundsAddUp(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ch := decode[Charge](t, b.charge("k-charge", 1000, "pm_card_visa"))

	equal(t, b.refundPart("k-r1", ch.ID, 300).status, http.StatusCreated, "first partial refund")
	equal(t, b.refundPart("k-r2", ch.ID, 200).status, http.StatusCreated, "second partial refund")
	after2 := b.simCharge(ch.ID)
	equal(t, after2.AmountRefunded, 500, "amount_refunded after 300+200")
	equal(t, after2.Refunded, false, "refunded after 300+200")

	tooMuch := b.refundPart("k-r3", ch.ID, 600)
	wantRefused(t, tooMuch, http.StatusBadRequest, "amount_too_large", "600 of a rest of 500")
	if msg := decode[struct{ Error errorBody }](t, tooMuch).Error.Message; !strings.Contains(msg, "500") {
		t.Fatalf("amount_too_large message %q does not say the rest", msg)
	}
	// The refusal was not stored: the same key works for an amount that fits.
	r3 := b.refundPart("k-r3", ch.ID, 100)
	equal(t, r3.status, http.StatusCreated, "refused key used again")
	equal(t, r3.header.Get("Idempotent-Replayed"), "", "refused key used again is not a replay")

	rest := b.refund("k-rest", ch.ID) // no amount: the whole rest
	equal(t, rest.status, http.StatusCreated, "refund of the rest")
	equal(t, decode[Refund](t, rest).Amount, 400, "refund of the rest amount")
	done := b.simCharge(ch.ID)
	equal(t, done.AmountRefunded, 1000, "amount_refunded at the end")
	equal(t, done.Refunded, true, "refunded at the end")

	nothing := b.refund("k-nothing", ch.ID)
	wantRefused(t, nothing, http.StatusBadRequest, "amount_too_large", "whole refund of nothing")
	if msg := decode[struct{ Error errorBody }](t, nothing).Error.Message; !strings.Contains(msg, "already fully refunded") {
		t.Fatalf("amount_too_large message %q does not say the charge is fully refunded", msg)
	}
	wantRefused(t, b.refundPart("k-one", ch.ID, 1), http.StatusBadRequest, "amount_too_large", "1 of nothing")

	var sum int64
	for _, re := range b.refunds() {
		equal(t, re.Charge, ch.ID, "refund's charge")
		sum += re.Amount
	}
	equal(t, len(b.refunds()), 4, "refunds")
	equal(t, sum, 1000, "sum of refunds")
	equal(t, b.stats(), Stats{ChargeCalls: 1, Charges: 1, RefundCalls: 7, Refunds: 4}, "stats")
}

func TestRefundRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	failed := decode[struct{ Charge Charge }](t, b.charge("k-declined", 500, "pm_card_declined")).Charge
	paid := decode[Charge](t, b.charge("k-paid", 500, "pm_card_visa"))

	wantRefused(t, b.refund("k-refund-failed", failed.ID), http.StatusBadRequest, "charge_not_refundable", "failed charge")
	wantRefused(t, b.refundPart("k-refund-failed-2", failed.ID, 100), http.StatusBadRequest, "charge_not_refundable", "failed charge with amount")
	wantRefused(t, b.refund("k-refund-unknown", "ch_000000000000000000000000"), http.StatusNotFound, "resource_missing", "unknown charge")
	wantRefused(t, b.refund("", paid.ID), http.StatusBadRequest, "idempotency_key_missing", "missing key")

	for name, body := range map[string]any{
		"no charge":        `{}`,
		"empty charge":     `{"charge":""}`,
		"numeric charge":   `{"charge":5}`,
		"zero amount":      `{"charge":"` + paid.ID + `","amount":0}`,
		"negative amount":  `{"charge":"` + paid.ID + `","amount":-5}`,
		"fraction amount":  `{"charge":"` + paid.ID + `","amount":5.5}`,
		"string amount":    `{"charge":"` + paid.ID + `","amount":"500"}`,
		"numeric ref":      `{"charge":"` + paid.ID + `","reference":7}`,
		"bad json":         `{"charge":`,
		"trailing data":    `{"charge":"` + paid.ID + `"} {}`,
		"not an object":    `[]`,
		"amount too large": `{"charge":"` + paid.ID + `","amount":501}`,
	} {
		r := b.do(http.MethodPost, "/v1/refunds", "k-invalid", body)
		code := "invalid_request"
		if name == "amount too large" {
			code = "amount_too_large"
		}
		wantRefused(t, r, http.StatusBadRequest, code, name)
	}
	equal(t, len(b.refunds()), 0, "refunds after refusals")
	equal(t, b.simCharge(paid.ID).AmountRefunded, 0, "amount_refunded after refusals")

	// Nothing was stored under the refused keys: they work once the cause is gone.
	r := b.refund("k-refund-unknown", paid.ID)
	equal(t, r.status, http.StatusCreated, "a key refused for an unknown charge, used again")
	equal(t, r.header.Get("Idempotent-Replayed"), "", "not a replay")
	equal(t, b.stats(), Stats{ChargeCalls: 2, Charges: 2, RefundCalls: 17, Refunds: 1}, "stats")
}

func TestRefundLookup(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ch := decode[Charge](t, b.charge("k-charge", 1000, "pm_card_visa"))
	other := decode[Charge](t, b.charge("k-other", 1000, "pm_card_visa"))
	first := decode[Refund](t, b.refundPart("k-r1", ch.ID, 100))
	second := decode[Refund](t, b.refundPart("k-r2", ch.ID, 200))
	elsewhere := decode[Refund](t, b.refund("k-r3", other.ID))

	found := b.do(http.MethodGet, "/v1/refunds?idempotency_key=k-r2", "", nil)
	equal(t, found.status, http.StatusOK, "found status")
	equal(t, decode[Refund](t, found), second, "found refund")

	wantRefused(t, b.do(http.MethodGet, "/v1/refunds?idempotency_key=k-nobody", "", nil), http.StatusNotFound, "resource_missing", "unknown key")
	// A charge's key is not a refund's key.
	wantRefused(t, b.do(http.MethodGet, "/v1/refunds?idempotency_key=k-charge", "", nil), http.StatusNotFound, "resource_missing", "charge key")

	byID := b.do(http.MethodGet, "/v1/refunds/"+first.ID, "", nil)
	equal(t, byID.status, http.StatusOK, "by id status")
	equal(t, decode[Refund](t, byID), first, "by id refund")
	wantRefused(t, b.do(http.MethodGet, "/v1/refunds/re_nope", "", nil), http.StatusNotFound, "resource_missing", "unknown id")

	list := func(query string) []Refund {
		t.Helper()
		r := b.do(http.MethodGet, "/v1/refunds?"+query, "", nil)
		equal(t, r.status, http.StatusOK, query+" status")
		page := decode[struct {
			Data    []Refund
			HasMore bool `json:"has_more"`
		}](t, r)
		equal(t, page.HasMore, false, query+" has_more")
		return page.Data
	}
	ofCharge := list("charge=" + ch.ID)
	equal(t, len(ofCharge), 2, "refunds of the charge")
	ids := map[string]bool{ofCharge[0].ID: true, ofCharge[1].ID: true}
	equal(t, ids[first.ID] && ids[second.ID], true, "the charge's refunds")
	equal(t, len(list("charge="+other.ID)), 1, "refunds of the other charge")
	equal(t, list("charge=" + other.ID)[0], elsewhere, "the other charge's refund")
	equal(t, len(list("reference=rfd_test")), 2, "refunds by reference")
	equal(t, len(list("")), 3, "all refunds")
	equal(t, b.stats().RefundCalls, 3, "lookups are not refund calls")
}

// TestConcurrentRefunds: partial refunds racing on one charge never add up
// to more than it, and callers sharing a key make one refund.
func TestConcurrentRefunds(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ch := decode[Charge](t, b.charge("k-charge", 1000, "pm_card_visa"))
	const callers = 20

	run := func(key func(i int) string) []reply {
		return b.sendTogether(callers, func(i int) *http.Request {
			return b.request(http.MethodPost, "/v1/refunds", key(i), refundBody(ch.ID, 100), true)
		})
	}

	// One key: one refund, every caller told about it.
	ids, made := map[string]bool{}, 0
	for _, r := range run(func(int) string { return "k-shared" }) {
		equal(t, r.status, http.StatusCreated, "shared key status")
		ids[decode[Refund](t, r).ID] = true
		if r.header.Get("Idempotent-Replayed") != "true" {
			made++
		}
	}
	equal(t, len(ids), 1, "refunds under one key")
	equal(t, made, 1, "answers that made the refund")

	// A key each for 20 × 100 of the 900 left: exactly 9 fit.
	ok, tooLarge := 0, 0
	for _, r := range run(func(i int) string { return "k-each-" + string(rune('a'+i)) }) {
		switch r.status {
		case http.StatusCreated:
			ok++
		default:
			wantRefused(t, r, http.StatusBadRequest, "amount_too_large", "late caller")
			tooLarge++
		}
	}
	equal(t, ok, 9, "refunds that fit")
	equal(t, tooLarge, callers-9, "refunds refused")
	done := b.simCharge(ch.ID)
	equal(t, done.AmountRefunded, 1000, "amount_refunded")
	equal(t, done.Refunded, true, "refunded")
	equal(t, b.stats(), Stats{ChargeCalls: 1, Charges: 1, RefundCalls: 2 * callers, Refunds: 10}, "stats")
}

// TestImportRefundedCharges: POST /_sim/charges takes amount_refunded (and
// the older "refunded":true alone, meaning the whole amount), and refunds
// of an imported charge start from what it says.
func TestImportRefundedCharges(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	imported := []Charge{
		{ID: "ch_whole", Amount: 500, Currency: "USD", Status: StatusSucceeded, Refunded: true, Created: 1_700_000_000},
		{ID: "ch_part", Amount: 500, Currency: "USD", Status: StatusSucceeded, AmountRefunded: 200, Created: 1_700_000_000},
		{ID: "ch_full", Amount: 500, Currency: "USD", Status: StatusSucceeded, AmountRefunded: 500, Created: 1_700_000_000},
	}
	equal(t, b.do(http.MethodPost, "/_sim/charges", "", map[string]any{"data": imported}).status, http.StatusOK, "import status")

	whole, part, full := b.simCharge("ch_whole"), b.simCharge("ch_part"), b.simCharge("ch_full")
	equal(t, whole.AmountRefunded, 500, "refunded:true alone: amount_refunded")
	equal(t, part.Refunded, false, "partly refunded: refunded")
	equal(t, full.Refunded, true, "wholly refunded: refunded")
	wantRefused(t, b.refund("k-1", "ch_whole"), http.StatusBadRequest, "amount_too_large", "refund of an imported refunded charge")
	wantRefused(t, b.refundPart("k-2", "ch_part", 301), http.StatusBadRequest, "amount_too_large", "301 of an imported rest of 300")
	equal(t, decode[Refund](t, b.refund("k-3", "ch_part")).Amount, 300, "refund of an imported rest")

	for name, c := range map[string]Charge{
		"more than the amount": {Amount: 500, Currency: "USD", Status: StatusSucceeded, AmountRefunded: 501},
		"refunded but partly":  {Amount: 500, Currency: "USD", Status: StatusSucceeded, AmountRefunded: 100, Refunded: true},
		"failed with refunds":  {Amount: 500, Currency: "USD", Status: StatusFailed, AmountRefunded: 100},
	} {
		wantRefused(t, b.do(http.MethodPost, "/_sim/charges", "", map[string]any{"data": []Charge{c}}), http.StatusBadRequest, "invalid_request", name)
	}
	equal(t, b.stats().Charges, 3, "charges")
}
