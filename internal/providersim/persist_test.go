package providersim

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

func TestStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state", "sim.json")
	first := setup(t, Config{StateFile: file})
	paid := first.charge("k-paid", 500, "pm_card_visa")
	declined := first.charge("k-declined", 700, "pm_card_declined")
	equal(t, first.refund("k-refund", decode[Charge](t, paid).ID).status, http.StatusCreated, "refund status")
	before := first.charges()
	noErr(t, first.sim.Close(), "Close")

	second := setup(t, Config{StateFile: file})

	after := second.charges()
	equal(t, len(after), len(before), "charges after restart")
	for i := range before {
		equal(t, after[i], before[i], "charge after restart")
	}
	equal(t, second.stats(), Stats{ChargeCalls: 2, Charges: 2, RefundCalls: 1, Refunds: 1}, "stats after restart")

	replay := second.charge("k-paid", 500, "pm_card_visa")
	equal(t, replay.status, http.StatusCreated, "replay status")
	equal(t, replay.header.Get("Idempotent-Replayed"), "true", "replay header")
	equal(t, string(replay.body), string(paid.body), "replay body")

	replayDeclined := second.charge("k-declined", 700, "pm_card_declined")
	equal(t, replayDeclined.status, http.StatusPaymentRequired, "declined replay status")
	equal(t, string(replayDeclined.body), string(declined.body), "declined replay body")

	refundReplay := second.refund("k-refund", decode[Charge](t, paid).ID)
	equal(t, refundReplay.header.Get("Idempotent-Replayed"), "true", "refund replay header")
	equal(t, second.stats(), Stats{ChargeCalls: 4, Charges: 2, RefundCalls: 2, Refunds: 1}, "stats after replays")

	entries, err := os.ReadDir(filepath.Dir(file))
	noErr(t, err, "read state dir")
	equal(t, len(entries), 1, "files in the state dir (no temp files left)")
}

func TestCorruptStateFileRefused(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sim.json")
	noErr(t, os.WriteFile(file, []byte(`{"version":1,"charges":[`), 0o600), "write state")

	if _, err := New(Config{StateFile: file}); err == nil {
		t.Fatal("New accepted a truncated state file")
	}
}

// TestRefundsSurviveRestart: refunds, their keys (with the request each
// answered), the charges' refunded amounts and refund_calls are all in the
// state file.
func TestRefundsSurviveRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sim.json")
	first := setup(t, Config{StateFile: file})
	ch := decode[Charge](t, first.charge("k-charge", 1000, "pm_card_visa"))
	part := first.refundPart("k-part", ch.ID, 300)
	equal(t, part.status, http.StatusCreated, "partial refund status")
	wantRefused(t, first.refundPart("k-big", ch.ID, 800), http.StatusBadRequest, "amount_too_large", "800 of 700")
	refundsBefore, chargesBefore := first.refunds(), first.charges()
	noErr(t, first.sim.Close(), "Close") // flushes refund_calls of the refused call too

	second := setup(t, Config{StateFile: file})

	equal(t, len(second.refunds()), 1, "refunds after restart")
	equal(t, second.refunds()[0], refundsBefore[0], "refund after restart")
	equal(t, second.charges()[0], chargesBefore[0], "charge after restart")
	equal(t, second.simCharge(ch.ID).AmountRefunded, 300, "amount_refunded after restart")
	found := second.do(http.MethodGet, "/v1/refunds?idempotency_key=k-part", "", nil)
	equal(t, found.status, http.StatusOK, "lookup after restart")
	equal(t, decode[Refund](t, found), refundsBefore[0], "refund found after restart")

	replay := second.refundPart("k-part", ch.ID, 300)
	equal(t, replay.status, http.StatusCreated, "replay status")
	equal(t, replay.header.Get("Idempotent-Replayed"), "true", "replay header")
	equal(t, string(replay.body), string(part.body), "replay body")
	wantRefused(t, second.refundPart("k-part", ch.ID, 200), http.StatusBadRequest, "idempotency_error", "key reused after restart")
	wantRefused(t, second.refundPart("k-big", ch.ID, 800), http.StatusBadRequest, "amount_too_large", "still too large after restart")
	equal(t, second.refundPart("k-big", ch.ID, 700).status, http.StatusCreated, "the rest after restart")
	equal(t, second.simCharge(ch.ID).Refunded, true, "refunded after the rest")
	equal(t, second.stats(), Stats{ChargeCalls: 1, Charges: 1, RefundCalls: 6, Refunds: 2}, "stats")
}

// TestStateFileFromBeforePartialRefunds: a state file written when refunds
// were always whole (no amount_refunded, no refund currency or reference, no
// request under refund keys, no refund_calls) still loads, with its refunded
// charge counted as wholly refunded and its refund key replaying.
func TestStateFileFromBeforePartialRefunds(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sim.json")
	const old = `{"version":1,
"charges":[
 {"id":"ch_old1","amount":500,"currency":"EUR","status":"succeeded","reference":"pay_1","idempotency_key":"k-c1","payment_method":"pm_card_visa","created":1700000000,"refunded":true},
 {"id":"ch_old2","amount":700,"currency":"EUR","status":"succeeded","reference":"pay_2","idempotency_key":"k-c2","payment_method":"pm_card_visa","created":1700000001,"refunded":false}],
"refunds":[{"id":"re_old1","charge":"ch_old1","amount":500,"status":"succeeded","idempotency_key":"k-r1","created":1700000100}],
"charge_keys":{
 "k-c1":{"id":"ch_old1","status":201,"body":{"id":"ch_old1"}},
 "k-c2":{"id":"ch_old2","status":201,"body":{"id":"ch_old2"}}},
"refund_keys":{"k-r1":{"id":"re_old1","status":201,"body":{"id":"re_old1","charge":"ch_old1","amount":500,"status":"succeeded","idempotency_key":"k-r1","created":1700000100}}},
"stats":{"charge_calls":2,"charges":2,"refunds":1,"webhooks_sent":0}}`
	noErr(t, os.WriteFile(file, []byte(old), 0o600), "write old state")

	b := setup(t, Config{StateFile: file})

	c1 := b.simCharge("ch_old1")
	equal(t, c1.AmountRefunded, 500, "old refunded charge's amount_refunded")
	equal(t, c1.Refunded, true, "old refunded charge's refunded")
	equal(t, b.simCharge("ch_old2").AmountRefunded, 0, "old unrefunded charge's amount_refunded")
	equal(t, b.refunds()[0].Currency, "EUR", "old refund's currency, from its charge")

	replay := b.refund("k-r1", "ch_old1")
	equal(t, replay.status, http.StatusCreated, "old key replay status")
	equal(t, replay.header.Get("Idempotent-Replayed"), "true", "old key replay header")
	wantRefused(t, b.refundPart("k-r1", "ch_old1", 500), http.StatusBadRequest, "idempotency_error", "old key with an amount")
	wantRefused(t, b.refund("k-r2", "ch_old1"), http.StatusBadRequest, "amount_too_large", "refund of an old refunded charge")
	equal(t, b.refundPart("k-r3", "ch_old2", 200).status, http.StatusCreated, "partial refund of an old charge")
	equal(t, b.stats(), Stats{ChargeCalls: 2, Charges: 2, RefundCalls: 4, Refunds: 2}, "stats")
}

func TestContradictoryStateFileRefused(t *testing.T) {
	t.Parallel()
	for name, charge := range map[string]string{
		"refunded more than charged": `{"id":"ch_1","amount":500,"currency":"USD","status":"succeeded","amount_refunded":600}`,
		"refunded but not wholly":    `{"id":"ch_1","amount":500,"currency":"USD","status":"succeeded","amount_refunded":100,"refunded":true}`,
		"refund of a failed charge":  `{"id":"ch_1","amount":500,"currency":"USD","status":"failed","amount_refunded":100}`,
		"negative amount refunded":   `{"id":"ch_1","amount":500,"currency":"USD","status":"succeeded","amount_refunded":-1}`,
	} {
		file := filepath.Join(t.TempDir(), "sim.json")
		noErr(t, os.WriteFile(file, []byte(`{"version":1,"charges":[`+charge+`]}`), 0o600), "write state")
		if _, err := New(Config{StateFile: file}); err == nil {
			t.Fatalf("%s: New accepted %s", name, charge)
		}
	}
}
