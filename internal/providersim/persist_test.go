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
	equal(t, second.stats(), Stats{ChargeCalls: 2, Charges: 2, Refunds: 1}, "stats after restart")

	replay := second.charge("k-paid", 500, "pm_card_visa")
	equal(t, replay.status, http.StatusCreated, "replay status")
	equal(t, replay.header.Get("Idempotent-Replayed"), "true", "replay header")
	equal(t, string(replay.body), string(paid.body), "replay body")

	replayDeclined := second.charge("k-declined", 700, "pm_card_declined")
	equal(t, replayDeclined.status, http.StatusPaymentRequired, "declined replay status")
	equal(t, string(replayDeclined.body), string(declined.body), "declined replay body")

	refundReplay := second.refund("k-refund", decode[Charge](t, paid).ID)
	equal(t, refundReplay.header.Get("Idempotent-Replayed"), "true", "refund replay header")
	equal(t, second.stats(), Stats{ChargeCalls: 4, Charges: 2, Refunds: 1}, "stats after replays")

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
