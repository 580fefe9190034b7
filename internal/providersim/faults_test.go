package providersim

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/acme/paymentsvc/internal/testkit"
)

func TestErrorRateFault(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	before := decode[Charge](t, b.charge("k-before", 500, "pm_card_visa"))
	b.setFaults(Faults{ErrorRate: 1.0, ErrorStatus: http.StatusServiceUnavailable})

	for _, key := range []string{"k-fault-1", "k-fault-2", "k-before"} {
		r := b.charge(key, 500, "pm_card_visa")
		require.Equal(t, http.StatusServiceUnavailable, r.status, key+" status")
		require.Equal(t, "simulated_fault", errorCode(t, r), key+" code")
	}
	require.Equal(t, Stats{ChargeCalls: 4, Charges: 1}, b.stats(), "stats")

	// Lookups and refunds are never faulted.
	require.Equal(t, http.StatusOK, b.do(http.MethodGet, "/v1/charges?idempotency_key=k-before", "", nil).status, "lookup status")
	require.Equal(t, http.StatusCreated, b.refund("k-refund", before.ID).status, "refund status")

	// error_status 0 means 503.
	b.setFaults(Faults{ErrorRate: 1.0})
	require.Equal(t, http.StatusServiceUnavailable, b.charge("k-fault-3", 500, "pm_card_visa").status, "default error status")
	b.setFaults(Faults{ErrorRate: 1.0, ErrorStatus: http.StatusInternalServerError})
	require.Equal(t, http.StatusInternalServerError, b.charge("k-fault-4", 500, "pm_card_visa").status, "configured error status")
	require.EqualValues(t, 1, b.stats().Charges, "charges after faults")
}

func TestDropAfterCommitFault(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.setFaults(Faults{DropAfterCommit: true})
	// A fresh connection per call: Go's transport silently retries a request
	// carrying Idempotency-Key once when a reused connection breaks, which
	// would hide the drop and add a charge call.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	for attempt := 1; attempt <= 2; attempt++ {
		_, err := fresh.Do(b.request(http.MethodPost, "/v1/charges", "k-drop", chargeBody(500, "pm_card_visa"), true))
		require.ErrorIs(t, err, io.EOF, "attempt %d", attempt)
	}

	found := b.do(http.MethodGet, "/v1/charges?idempotency_key=k-drop", "", nil)
	require.Equal(t, http.StatusOK, found.status, "lookup status")
	require.Equal(t, StatusSucceeded, decode[Charge](t, found).Status, "charge status")
	require.Equal(t, Stats{ChargeCalls: 2, Charges: 1}, b.stats(), "stats")

	b.setFaults(Faults{})
	r := b.charge("k-drop", 500, "pm_card_visa")
	require.Equal(t, http.StatusCreated, r.status, "status once the fault is gone")
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"), "replay header once the fault is gone")
}

func TestLatencyOutlivesTheCaller(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.setFaults(Faults{LatencyMS: 300})
	impatient := &http.Client{Timeout: 50 * time.Millisecond}

	_, err := impatient.Do(b.request(http.MethodPost, "/v1/charges", "k-slow", chargeBody(500, "pm_card_visa"), true))
	require.Error(t, err, "a 50ms client got an answer from a 300ms provider")

	testkit.Eventually(t, 10*time.Second, "the abandoned charge to be created", func() bool {
		chs := b.charges()
		return len(chs) == 1 && chs[0].IdempotencyKey == "k-slow"
	})
	require.Equal(t, Stats{ChargeCalls: 1, Charges: 1}, b.stats(), "stats")
}

func TestDeleteFaultsRestoresStartupLatency(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Latency: 20 * time.Millisecond})
	b.setFaults(Faults{LatencyMS: 800, ErrorRate: 1.0, ErrorStatus: 502, DropAfterCommit: true})
	require.Equal(t, http.StatusBadGateway, b.charge("k-faulted", 500, "pm_card_visa").status, "faulted status")

	r := send(t, b.client, b.request(http.MethodDelete, "/_sim/faults", "", nil, false))
	require.Equal(t, http.StatusOK, r.status, "DELETE status")

	got := decode[Faults](t, send(t, b.client, b.request(http.MethodGet, "/_sim/faults", "", nil, false)))
	require.Equal(t, Faults{LatencyMS: 20}, got, "faults after DELETE")
	require.Equal(t, http.StatusCreated, b.charge("k-after", 500, "pm_card_visa").status, "status after DELETE")
}

func TestPutFaultsRejectsNonsense(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	for name, body := range map[string]string{
		"rate above one":   `{"error_rate":1.5}`,
		"negative latency": `{"latency_ms":-1}`,
		"success status":   `{"error_rate":1,"error_status":200}`,
		"unknown field":    `{"latency":800}`,
		"bad json":         `{`,
	} {
		r := send(t, b.client, b.request(http.MethodPut, "/_sim/faults", "", body, false))
		require.Equal(t, http.StatusBadRequest, r.status, name+" status")
		require.Equal(t, "invalid_request", errorCode(t, r), name+" code")
	}
	got := decode[Faults](t, send(t, b.client, b.request(http.MethodGet, "/_sim/faults", "", nil, false)))
	require.Equal(t, Faults{}, got, "faults unchanged")
}
