package providersim

import (
	"net/http"
	"regexp"
	"testing"
)

var refundIDPattern = regexp.MustCompile(`^re_[0-9a-f]{24}$`)

func (b *bundle) refund(key, chargeID string) reply {
	b.t.Helper()
	return b.do(http.MethodPost, "/v1/refunds", key, map[string]string{"charge": chargeID})
}

func TestRefund(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	ch := decode[Charge](t, b.charge("k-charge", 500, "pm_card_visa"))
	other := decode[Charge](t, b.charge("k-other", 900, "pm_card_visa"))

	r := b.refund("k-refund", ch.ID)

	equal(t, r.status, http.StatusCreated, "status")
	re := decode[Refund](t, r)
	if !refundIDPattern.MatchString(re.ID) {
		t.Fatalf("refund id %q does not match %v", re.ID, refundIDPattern)
	}
	equal(t, re.Charge, ch.ID, "charge")
	equal(t, re.Amount, 500, "amount")
	equal(t, re.Status, StatusSucceeded, "status field")
	equal(t, re.IdempotencyKey, "k-refund", "idempotency_key")
	refunded := decode[Charge](t, b.do(http.MethodGet, "/v1/charges?idempotency_key=k-charge", "", nil))
	equal(t, refunded.Refunded, true, "charge refunded")

	replay := b.refund("k-refund", ch.ID)
	equal(t, replay.status, http.StatusCreated, "replay status")
	equal(t, replay.header.Get("Idempotent-Replayed"), "true", "replay header")
	equal(t, decode[Refund](t, replay).ID, re.ID, "replay id")

	reused := b.refund("k-refund", other.ID)
	equal(t, reused.status, http.StatusBadRequest, "reused key status")
	equal(t, errorCode(t, reused), "idempotency_error", "reused key code")

	twice := b.refund("k-refund-2", ch.ID)
	equal(t, twice.status, http.StatusBadRequest, "second refund status")
	equal(t, errorCode(t, twice), "charge_already_refunded", "second refund code")

	equal(t, b.stats(), Stats{ChargeCalls: 2, Charges: 2, Refunds: 1}, "stats")
}

func TestRefundRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	failed := decode[struct{ Charge Charge }](t, b.charge("k-declined", 500, "pm_card_declined")).Charge

	notRefundable := b.refund("k-refund-failed", failed.ID)
	equal(t, notRefundable.status, http.StatusBadRequest, "failed charge status")
	equal(t, errorCode(t, notRefundable), "charge_not_refundable", "failed charge code")

	unknown := b.refund("k-refund-unknown", "ch_000000000000000000000000")
	equal(t, unknown.status, http.StatusNotFound, "unknown charge status")
	equal(t, errorCode(t, unknown), "resource_missing", "unknown charge code")

	noKey := b.refund("", failed.ID)
	equal(t, noKey.status, http.StatusBadRequest, "missing key status")
	equal(t, errorCode(t, noKey), "idempotency_key_missing", "missing key code")

	noCharge := b.do(http.MethodPost, "/v1/refunds", "k-refund-empty", `{}`)
	equal(t, noCharge.status, http.StatusBadRequest, "missing charge status")
	equal(t, errorCode(t, noCharge), "invalid_request", "missing charge code")

	equal(t, b.stats().Refunds, 0, "refunds")
}
