package providersim

import (
	"errors"
	"io"
	"net/http"
	"testing"
	"time"
)

func TestErrorRateFault(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	before := decode[Charge](t, b.charge("k-before", 500, "pm_card_visa"))
	b.setFaults(Faults{ErrorRate: 1.0, ErrorStatus: http.StatusServiceUnavailable})

	for _, key := range []string{"k-fault-1", "k-fault-2", "k-before"} {
		r := b.charge(key, 500, "pm_card_visa")
		equal(t, r.status, http.StatusServiceUnavailable, key+" status")
		equal(t, errorCode(t, r), "simulated_fault", key+" code")
	}
	equal(t, b.stats(), Stats{ChargeCalls: 4, Charges: 1}, "stats")

	// Lookups and refunds are never faulted.
	equal(t, b.do(http.MethodGet, "/v1/charges?idempotency_key=k-before", "", nil).status, http.StatusOK, "lookup status")
	equal(t, b.refund("k-refund", before.ID).status, http.StatusCreated, "refund status")

	// error_status 0 means 503.
	b.setFaults(Faults{ErrorRate: 1.0})
	equal(t, b.charge("k-fault-3", 500, "pm_card_visa").status, http.StatusServiceUnavailable, "default error status")
	b.setFaults(Faults{ErrorRate: 1.0, ErrorStatus: http.StatusInternalServerError})
	equal(t, b.charge("k-fault-4", 500, "pm_card_visa").status, http.StatusInternalServerError, "configured error status")
	equal(t, b.stats().Charges, 1, "charges after faults")
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
		if !errors.Is(err, io.EOF) {
			t.Fatalf("attempt %d: got error %v, want EOF", attempt, err)
		}
	}

	found := b.do(http.MethodGet, "/v1/charges?idempotency_key=k-drop", "", nil)
	equal(t, found.status, http.StatusOK, "lookup status")
	equal(t, decode[Charge](t, found).Status, StatusSucceeded, "charge status")
	equal(t, b.stats(), Stats{ChargeCalls: 2, Charges: 1}, "stats")

	b.setFaults(Faults{})
	r := b.charge("k-drop", 500, "pm_card_visa")
	equal(t, r.status, http.StatusCreated, "status once the fault is gone")
	equal(t, r.header.Get("Idempotent-Replayed"), "true", "replay header once the fault is gone")
}

func TestLatencyOutlivesTheCaller(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{})
	b.setFaults(Faults{LatencyMS: 300})
	impatient := &http.Client{Timeout: 50 * time.Millisecond}

	_, err := impatient.Do(b.request(http.MethodPost, "/v1/charges", "k-slow", chargeBody(500, "pm_card_visa"), true))
	if err == nil {
		t.Fatal("a 50ms client got an answer from a 300ms provider")
	}

	eventually(t, "the abandoned charge to be created", func() bool {
		chs := b.charges()
		return len(chs) == 1 && chs[0].IdempotencyKey == "k-slow"
	})
	equal(t, b.stats(), Stats{ChargeCalls: 1, Charges: 1}, "stats")
}

func TestDeleteFaultsRestoresStartupLatency(t *testing.T) {
	t.Parallel()
	b := setup(t, Config{Latency: 20 * time.Millisecond})
	b.setFaults(Faults{LatencyMS: 800, ErrorRate: 1.0, ErrorStatus: 502, DropAfterCommit: true})
	equal(t, b.charge("k-faulted", 500, "pm_card_visa").status, http.StatusBadGateway, "faulted status")

	r := send(t, b.client, b.request(http.MethodDelete, "/_sim/faults", "", nil, false))
	equal(t, r.status, http.StatusOK, "DELETE status")

	got := decode[Faults](t, send(t, b.client, b.request(http.MethodGet, "/_sim/faults", "", nil, false)))
	equal(t, got, Faults{LatencyMS: 20}, "faults after DELETE")
	equal(t, b.charge("k-after", 500, "pm_card_visa").status, http.StatusCreated, "status after DELETE")
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
		equal(t, r.status, http.StatusBadRequest, name+" status")
		equal(t, errorCode(t, r), "invalid_request", name+" code")
	}
	got := decode[Faults](t, send(t, b.client, b.request(http.MethodGet, "/_sim/faults", "", nil, false)))
	equal(t, got, Faults{}, "faults unchanged")
}
