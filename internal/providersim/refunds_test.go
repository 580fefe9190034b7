package providersim

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
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
	require.Equal(t, http.StatusCreated, r.status, "status")
	re := decode[Refund](t, r)
	require.Regexp(t, refundIDPattern, re.ID)
	require.Equal(t, ch.ID, re.Charge, "charge")
	require.EqualValues(t, 500, re.Amount, "amount")
	require.Equal(t, StatusSucceeded, re.Status, "status field")
	require.Equal(t, "k-refund", re.IdempotencyKey, "idempotency_key")
	refunded := decode[Charge](t, b.do(http.MethodGet, "/v1/charges?idempotency_key=k-charge", "", nil))
	require.Equal(t, true, refunded.Refunded, "charge refunded")

	replay := b.refund("k-refund", ch.ID)
	require.Equal(t, http.StatusCreated, replay.status, "replay status")
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"), "replay header")
	require.Equal(t, re.ID, decode[Refund](t, replay).ID, "replay id")

	reused := b.refund("k-refund", other.ID)
	require.Equal(t, http.StatusBadRequest, reused.status, "reused key status")
	require.Equal(t, "idempotency_error", errorCode(t, reused), "reused key code")

	twice := b.refund("k-refund-2", ch.ID)
	require.Equal(t, http.StatusBadRequest, twice.status, "second refund status")
	require.Equal(t, "charge_already_refunded", errorCode(t, twice), "second refund code")
	require.Equal(t, Stats{ChargeCalls: 2, Charges: 2, Refunds: 1}, b.stats(), "stats")
}

func TestRefundRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	failed := decode[struct{ Charge Charge }](t, b.charge("k-declined", 500, "pm_card_declined")).Charge

	notRefundable := b.refund("k-refund-failed", failed.ID)
	require.Equal(t, http.StatusBadRequest, notRefundable.status, "failed charge status")
	require.Equal(t, "charge_not_refundable", errorCode(t, notRefundable), "failed charge code")

	unknown := b.refund("k-refund-unknown", "ch_000000000000000000000000")
	require.Equal(t, http.StatusNotFound, unknown.status, "unknown charge status")
	require.Equal(t, "resource_missing", errorCode(t, unknown), "unknown charge code")

	noKey := b.refund("", failed.ID)
	require.Equal(t, http.StatusBadRequest, noKey.status, "missing key status")
	require.Equal(t, "idempotency_key_missing", errorCode(t, noKey), "missing key code")

	noCharge := b.do(http.MethodPost, "/v1/refunds", "k-refund-empty", `{}`)
	require.Equal(t, http.StatusBadRequest, noCharge.status, "missing charge status")
	require.Equal(t, "invalid_request", errorCode(t, noCharge), "missing charge code")
	require.EqualValues(t, 0, b.stats().Refunds, "refunds")
}
