package providersim

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStateSurvivesRestart(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state", "sim.json")
	first := setup(t, Config{StateFile: file})
	paid := first.charge("k-paid", 500, "pm_card_visa")
	declined := first.charge("k-declined", 700, "pm_card_declined")
	require.Equal(t, http.StatusCreated, first.refund("k-refund", decode[Charge](t, paid).ID).status, "refund status")
	before := first.charges()
	require.NoError(t, first.sim.Close(), "Close")

	second := setup(t, Config{StateFile: file})

	after := second.charges()
	require.Equal(t, len(before), len(after), "charges after restart")
	for i := range before {
		require.Equal(t, before[i], after[i], "charge after restart")
	}
	require.Equal(t, Stats{ChargeCalls: 2, Charges: 2, Refunds: 1}, second.stats(), "stats after restart")

	replay := second.charge("k-paid", 500, "pm_card_visa")
	require.Equal(t, http.StatusCreated, replay.status, "replay status")
	require.Equal(t, "true", replay.header.Get("Idempotent-Replayed"), "replay header")
	require.Equal(t, string(paid.body), string(replay.body), "replay body")

	replayDeclined := second.charge("k-declined", 700, "pm_card_declined")
	require.Equal(t, http.StatusPaymentRequired, replayDeclined.status, "declined replay status")
	require.Equal(t, string(declined.body), string(replayDeclined.body), "declined replay body")

	refundReplay := second.refund("k-refund", decode[Charge](t, paid).ID)
	require.Equal(t, "true", refundReplay.header.Get("Idempotent-Replayed"), "refund replay header")
	require.Equal(t, Stats{ChargeCalls: 4, Charges: 2, Refunds: 1}, second.stats(), "stats after replays")

	entries, err := os.ReadDir(filepath.Dir(file))
	require.NoError(t, err, "read state dir")
	require.EqualValues(t, 1, len(entries), "files in the state dir (no temp files left)")
}

func TestCorruptStateFileRefused(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "sim.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"version":1,"charges":[`), 0o600), "write state")

	_, err := New(Config{StateFile: file})
	require.Error(t, err, "New accepted a truncated state file")
}
